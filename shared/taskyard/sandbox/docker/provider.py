"""The docker backend: one locked-down container per session, running the kernel.

The container is made as `container_spec` says and spoken to through `docker_channel`; this
module is the provider: it labels the containers, hands kernels off to another worker on the
same engine and takes them over, checks the runtime, and cleans up what a worker left.

The kernel's supervisor is the container's PID 1 (no docker-init: its dumpable PID 1 would
hold the container's stdio where a cell could open it through /proc/1/fd). The container has
no log driver, so nothing a sandbox writes grows a file on the host.

Containers carry the labels ``taskyard.worker`` (`settings.sandbox_worker_label`),
``taskyard.node`` (the tool worker's Celery node name), ``taskyard.owner`` (one id per
provider) and ``taskyard.session`` (the session key, or "" for a warm-pool container). A
kernel handed off (`hand_off`) lives on its own lease until another worker takes it over. A
restarted worker removes every container left under its label and node name
(`remove_orphans`) but those handed off.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import docker
import requests
from docker.errors import DockerException, NotFound

from taskyard.plumbing.settings import SandboxSettings
from taskyard.sandbox.channel import KernelChannel
from taskyard.sandbox.demand import PoolBounds, pool_bounds
from taskyard.sandbox.docker.channel import DockerChannel, Leases, remove_container
from taskyard.sandbox.docker.hosts import HostedChannel, SessionHost, SessionHosts
from taskyard.sandbox.docker.spec import ContainerSpec, missing_runtime, runtimes
from taskyard.sandbox.errors import KernelGone, SandboxError, SandboxUnavailable
from taskyard.sandbox.pool import PoolState
from taskyard.sandbox.provider import KernelSandboxProvider, SandboxLimits, tenant_of

__all__ = [
    "ENGINE_TOKEN_HEADER",
    "HANDOFF_PREFIX",
    "NODE_LABEL",
    "NO_NODE",
    "OWNER_LABEL",
    "SESSION_LABEL",
    "WORKER_LABEL",
    "DockerSandboxProvider",
]

SESSION_LABEL = "taskyard.session"
OWNER_LABEL = "taskyard.owner"
WORKER_LABEL = "taskyard.worker"
NODE_LABEL = "taskyard.node"
NO_NODE = "-"  # a provider outside a Celery worker (tests, a library user)
HANDOFF_PREFIX = "taskyard-handoff-"  # the name of a container handed to another worker
ENGINE_TOKEN_HEADER = "X-Taskyard-Engine-Token"  # the worker's credential for the engine proxy

log = logging.getLogger(__name__)


class DockerSandboxProvider(KernelSandboxProvider):
    """The production `SandboxProvider`: one container per session, from the sandbox image.

    Limits come from settings unless given: `spec` overrides image and limits, `client` the
    engine connection (tests hand in their own).
    """

    def __init__(
        self,
        settings: SandboxSettings,
        *,
        spec: ContainerSpec | None = None,
        client: docker.DockerClient | None = None,
        pool_size: int | None = None,
        pool: PoolBounds | None = None,
        idle_s: float | None = None,
        limits: SandboxLimits | None = None,
        node: str = NO_NODE,
    ) -> None:
        self._spec = spec or ContainerSpec.from_settings(settings)
        self._client = client or _connect(settings.sandbox_engine_token.get_secret_value())
        self.owner = uuid.uuid4().hex[:12]
        self.worker_label = settings.sandbox_worker_label
        self.node = node
        self._engine: str | None = None
        self._leases = Leases(self._spec.lease_s, settings.tool_worker_beat_s)
        bounds = pool or pool_bounds(settings, pool_size)
        self._hosts: SessionHosts | None = None
        if self._spec.forks:
            # The warm pool holds hosts (unclaimed fork-server containers), not kernels.
            self._hosts = SessionHosts(self._start_host, self._spec.sessions, bounds)
            bounds = PoolBounds.fixed(0)
        super().__init__(
            self._hosts or self._start_kernel,
            pool=bounds,
            idle_s=settings.sandbox_idle_s if idle_s is None else idle_s,
            limits=limits or SandboxLimits.from_settings(settings),
            interrupt_grace_s=settings.sandbox_interrupt_grace_s,
        )

    def _start_kernel(self, session_key: str | None) -> DockerChannel:
        labels = {
            WORKER_LABEL: self.worker_label,
            NODE_LABEL: self.node,
            OWNER_LABEL: self.owner,
            SESSION_LABEL: session_key or "",
        }
        return self._leases.keep(DockerChannel.start(self._client.api, self._spec, labels))

    def _start_host(self, session_key: str | None) -> DockerChannel:
        """A fork-server container, for the tenant `session_key` names (None: unclaimed, for
        the pool): its sessions are keyed inside it, so it carries no session label."""
        return self._start_kernel(None)

    def pool_state(self) -> PoolState:
        """The warm pool's: of hosts (unclaimed fork-server containers) where there are."""
        if self._hosts is not None:
            return self._hosts.pool_state()
        return super().pool_state()

    @property
    def place(self) -> str:
        """This worker's Docker engine (its ID): another worker on it can take a kernel over."""
        if self._engine is None:
            self._engine = f"docker:{self._client.info()['ID']}"
        return self._engine

    def hand_off(self, lease_s: float) -> dict[str, str]:
        """See `KernelSandboxProvider.hand_off`: each container keeps running, renamed
        ``taskyard-handoff-...`` so that its maker's next start leaves it; the handle is the
        engine and the container ("docker:<engine id>/<container id>"), and for a session of
        a fork-server host its key there ("...#<key>")."""
        detached = self._detach_idle()
        if self._hosts is not None:
            return self._hand_off_hosts(detached, lease_s)
        handles = {}
        for key, channel in detached.items():
            assert isinstance(channel, DockerChannel)
            try:
                container = channel.detach(lease_s)
            except KernelGone:
                channel.close()  # it died meanwhile: nothing to hand over
                continue
            self._mark_handed(container)
            handles[key] = f"{self.place}/{container}"
        return handles

    def _hand_off_hosts(self, detached: dict[str, KernelChannel], lease_s: float) -> dict[str, str]:
        """Each host with a session to hand over goes whole: its sessions still busy here are
        stopped first (they end with this worker, as they would have)."""
        by_host: dict[SessionHost, dict[str, HostedChannel]] = {}
        for key, channel in detached.items():
            assert isinstance(channel, HostedChannel)
            by_host.setdefault(channel.host, {})[key] = channel
        handles = {}
        for host, sessions in by_host.items():
            kept = {channel.key for channel in sessions.values()}
            for other in set(host.keys()) - kept:
                host.close_session(other)
            try:
                container = host.channel.detach(lease_s)
            except KernelGone:
                host.close()
                continue
            self._mark_handed(container)
            handles.update(
                {key: f"{self.place}/{container}#{ch.key}" for key, ch in sessions.items()}
            )
        return handles

    def take_over(self, session_key: str, handle: str) -> None:
        """See `KernelSandboxProvider.take_over`: attach to the handed-off container."""
        place, _, target = handle.rpartition("/")
        container, _, hosted = target.partition("#")
        if place != self.place:
            raise SandboxUnavailable(
                "its sandbox runs on another Docker engine; no worker there took it over"
            )
        if hosted and self._hosts is not None and (held := self._hosts.attached(container)):
            channel: KernelChannel = self._hosts.take_over(held, hosted)
        else:
            attached = self._attach_container(container)
            if hosted and self._hosts is not None:
                host = SessionHost(attached, tenant_of(session_key), self._spec.sessions)
                channel = self._hosts.take_over(host, hosted)
            else:
                channel = attached
        try:
            self._attach(session_key, channel)
        except SandboxError:
            channel.close()
            raise

    def _attach_container(self, container: str) -> DockerChannel:
        """A channel to a handed-off container's kernel, on this worker's lease."""
        try:
            state = self._client.api.inspect_container(container)["State"]
            if not state.get("Running"):
                raise SandboxUnavailable("its sandbox's container had ended")
            channel = self._leases.keep(
                DockerChannel.attach(self._client.api, container, self._spec.memory)
            )
            # From now on the kernel lives on this worker's lease, not the hand-off's longer
            # one: should this worker die too, it ends as its own kernels do.
            channel.renew(self._spec.lease_s)
        except NotFound:
            raise SandboxUnavailable("its sandbox's container is gone") from None
        except (DockerException, requests.RequestException) as exc:
            raise SandboxUnavailable(f"could not attach to its sandbox: {exc}") from exc
        return channel

    def _mark_handed(self, container: str) -> None:
        try:
            self._client.api.rename(container, f"{HANDOFF_PREFIX}{container[:12]}")
        except DockerException:
            log.warning("could not mark %s as handed off; a restart may remove it", container)

    def check(self) -> None:
        """What `KernelSandboxProvider.check` does, under the configured runtime: a runtime
        the engine does not have is refused first, naming those it has and how to add it."""
        runtime = self._spec.runtime
        try:
            known = runtimes(self._client.api)
        except DockerException as exc:
            raise SandboxUnavailable(f"the Docker engine does not answer: {exc}") from exc
        if runtime not in known:
            raise SandboxUnavailable(missing_runtime(runtime, known))
        try:
            super().check()
        except SandboxUnavailable as exc:
            raise SandboxUnavailable(f"under the {runtime!r} runtime: {exc}") from exc
        except requests.RequestException as exc:  # a runtime that hangs holds the engine's call
            raise SandboxUnavailable(
                f"under the {runtime!r} runtime, the engine did not start a sandbox: {exc}"
            ) from exc

    def remove_orphans(self) -> int:
        """Remove every container under this worker's label and node name (or under its label
        and no node name: an older taskyard's) that another provider made, running ones too
        (a worker that died mid-cell); how many were removed. Other workers on the engine
        under the same label (other node names) keep theirs."""
        leftovers = [
            labelled["Id"]
            for labelled in self._labelled(f"{WORKER_LABEL}={self.worker_label}")
            if labelled["Labels"].get(NODE_LABEL, self.node) == self.node
            and labelled["Labels"].get(OWNER_LABEL) != self.owner
            and not _handed_off(labelled)
        ]
        for container_id in leftovers:
            remove_container(self._client.api, container_id)
        return len(leftovers)

    def close_all(self) -> None:
        """Stop every session and warm container, and any container this provider left (but
        those it handed off)."""
        self._leases.stop()
        super().close_all()
        if self._hosts is not None:
            self._hosts.close()
        for labelled in self._labelled(f"{OWNER_LABEL}={self.owner}"):
            if not _handed_off(labelled):
                remove_container(self._client.api, labelled["Id"])

    def _labelled(self, label: str) -> list[dict[str, Any]]:
        # The engine's list as it is, labels included: the SDK's `containers.list` fetches
        # each container again, and fails on one removed meanwhile (a warm start that failed).
        found: list[dict[str, Any]] = self._client.api.containers(
            all=True, filters={"label": label}
        )
        return found


def _handed_off(listed: dict[str, Any]) -> bool:
    """Whether a container (as the engine lists it) runs a kernel handed to another worker."""
    names = listed.get("Names") or []
    return listed.get("State") == "running" and any(
        name.lstrip("/").startswith(HANDOFF_PREFIX) for name in names
    )


def _connect(token: str) -> docker.DockerClient:
    """The engine the environment names (`DOCKER_HOST`: the engine proxy, in a deployment),
    with the worker's `token` for the proxy on every request, if it has one."""
    try:
        client = docker.from_env()
        if token:  # on the session, so that `attach_socket`'s raw request carries it too
            client.api.headers[ENGINE_TOKEN_HEADER] = token
        client.ping()
    except DockerException as exc:
        raise SandboxUnavailable(f"no Docker engine reachable: {exc}") from exc
    return client
