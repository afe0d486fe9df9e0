"""The root of every error the shared library raises: ``except TaskyardError`` catches them all.

    TaskyardError
    ├── ClientError       taskyard.client: the gateway refused a request, or was not reached
    ├── AgentError        taskyard.agentkit.agents: an agent cannot go on
    ├── LLMError          taskyard.agentkit.llms: a model call failed
    ├── ActionError       taskyard.agentkit.actions: a tool failed, in words the model reads
    ├── SandboxError      taskyard.sandbox: no interpreter to run code in (see its tree)
    ├── ArtifactError     taskyard.files.artifacts: an artifact refused, or a store that fails
    ├── CredentialError   taskyard.plumbing.tenant_credentials: a credential that does not hold
    ├── RegistryError     taskyard.agentkit.registry: a name nothing registered (also a
    │                     LookupError)
    ├── NotReplicated     taskyard.runtime.store: too few replicas confirmed a write in time
    └── InvalidSignature  taskyard.plumbing.webhook_signatures: a webhook delivery that does
                          not check out (also a ValueError; receivers import it from
                          taskyard.client.webhooks)

Each package's errors derive from these; the services' roots (`GatewayError`,
`AgentWorkerError`) derive from `TaskyardError` too. The sandbox kernel
(`taskyard.sandbox.kernel`) is the exception: it runs alone in the sandbox, on the standard
library, and its errors never leave it.
"""

from __future__ import annotations

__all__ = ["TaskyardError"]


class TaskyardError(Exception):
    """Base of every error taskyard defines."""
