"""What a task asks for: the agent to run, inline or by registered name. Workers build the agent
from this; the gateway validates it at the door."""

from __future__ import annotations

from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

__all__ = [
    "MCP_SERVER_NAME_PATTERN", "AgentSpec", "ApprovalPolicy", "BusyPolicy", "McpServer",
    "WebhookSpec",
]  # fmt: skip

_Name = Annotated[str, StringConstraints(min_length=1, max_length=128)]
# An MCP server's name prefixes its tools' ("weather.forecast"): no dot, so the first one
# parts server from tool.
MCP_SERVER_NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_-]{0,31}$"
_Argument = Annotated[str, StringConstraints(min_length=1, max_length=1024)]
_HEADER_VALUE = r"^[\x21-\x7e][\x20-\x7e]*$"  # printable ASCII, as an HTTP header may carry
_Credential = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.-]{1,64}$")]
# A task's states (taskyard.runtime.task.TaskStatus, spelled out here: the task record builds on
# specs).
_Status = Literal[
    "queued", "running", "waiting_tools", "waiting_approval",
    "succeeded", "failed", "cancelled", "timed_out",
]  # fmt: skip

# What a task does when its session runs another: wait its turn, be refused, or take the
# session now, the running task cancelled with its committed steps kept (`interrupt`) or
# removed from the session's memory (`rollback`).
BusyPolicy = Literal["enqueue", "reject", "interrupt", "rollback"]


class ApprovalPolicy(BaseModel):
    """Which tool calls wait for a person's decision before they run."""

    model_config = ConfigDict(extra="forbid")

    tools: list[_Name] | Literal["*"] = Field(
        description='Tool names (a toolkit, or one of its APIs: "WebBrowser.open"), or "*".',
        max_length=32,
    )
    timeout_s: float | None = Field(
        default=None, gt=0, le=30 * 24 * 3600, strict=True,
        description="Undecided after this long, a call is denied; unset: it waits for good.",
    )  # fmt: skip

    def needs(self, call_name: str) -> bool:
        """Whether a call of `call_name` ("Tool" or "Toolkit.api") waits for approval."""
        if self.tools == "*":
            return True
        return call_name in self.tools or call_name.split(".", 1)[0] in self.tools


class McpServer(BaseModel):
    """An MCP server whose tools the agent may call: a remote one (streamable HTTP, `url`),
    or a local one (`command`, speaking stdio) run inside the session's sandbox."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(
        pattern=MCP_SERVER_NAME_PATTERN,
        description='Prefixes its tools\' names: "weather" offers "weather.forecast".',
    )
    url: str | None = Field(
        default=None, min_length=8, max_length=2048,
        description="A remote server's streamable HTTP endpoint (http:// or https://).",
    )  # fmt: skip
    credential: _Credential | None = Field(
        default=None,
        description="The name of the tenant's credential for it (a bearer token the tool "
        "worker adds; configured by the operator, never sent by the client).",
    )
    command: list[_Argument] | None = Field(
        default=None, min_length=1, max_length=32,
        description="A local server's command line, run in the session's sandbox "
        '(["python3", "server.py"] for a file uploaded to the session).',
    )  # fmt: skip
    tools: list[_Name] | None = Field(
        default=None, max_length=128, description="Only these of its tools; unset: all."
    )

    @field_validator("url")
    @classmethod
    def _http(cls, url: str | None) -> str | None:
        if url is None:
            return None
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("an MCP server's url must be http:// or https:// with a host")
        return url

    @model_validator(mode="after")
    def _one_transport(self) -> McpServer:
        if (self.url is None) == (self.command is None):
            raise ValueError("an MCP server has a url (remote) or a command (local), not both")
        if self.credential is not None and self.url is None:
            raise ValueError("a credential is for a remote server (one with a url)")
        return self

    @property
    def local(self) -> bool:
        """Whether it runs in the session's sandbox (stdio) rather than over HTTP."""
        return self.command is not None


class AgentSpec(BaseModel):
    """An agent described inline (model, prompt, tools, limits) or by a registered name."""

    model_config = ConfigDict(extra="forbid")

    agent: _Name | None = Field(
        default=None, description="A registered agent's name; inline fields then only override."
    )
    name: str = Field(default="assistant", min_length=1, max_length=64)
    model: str | None = Field(
        default=None, min_length=1, max_length=256, description="Model name; default from settings."
    )
    system_prompt: str | None = Field(default=None, max_length=100_000)
    tools: list[_Name] = Field(default_factory=lambda: ["IPythonInterpreter"], max_length=32)
    # Strict: JSON `true` or "3" is not a number of steps.
    max_steps: int | None = Field(default=None, ge=1, le=100, strict=True)
    temperature: float | None = Field(default=None, ge=0, le=2, strict=True)
    context_window: int | None = Field(
        default=None, ge=256, le=10_000_000, strict=True,
        description="The model's context in tokens; else what the proxy's /v1/models reports.",
    )  # fmt: skip
    max_tokens_total: int | None = Field(
        default=None, ge=1, strict=True,
        description="A token budget for the whole task: it fails before a step would pass it.",
    )  # fmt: skip
    deadline_s: float | None = Field(
        default=None, gt=0, allow_inf_nan=False, strict=True,
        description="Wall-clock seconds the task may run before it ends timed_out; unset: the "
        "deployment's default. Over the tenant's maximum: refused.",
    )  # fmt: skip
    approval: ApprovalPolicy | None = Field(
        default=None, description="Tool calls that wait for a person's approval."
    )
    if_session_busy: BusyPolicy | None = Field(
        default=None,
        description="This agent's default for a task whose session runs another (a task's own "
        "`if_session_busy` wins): `enqueue` if unset.",
    )
    mcp_servers: list[McpServer] = Field(
        default_factory=list, max_length=8,
        description="MCP servers whose tools the agent may call, each tool named "
        '"<server>.<tool>".',
    )  # fmt: skip

    @field_validator("mcp_servers")
    @classmethod
    def _distinct_servers(cls, servers: list[McpServer]) -> list[McpServer]:
        names = [server.name for server in servers]
        if len(set(names)) != len(names):
            raise ValueError("each MCP server needs a name of its own")
        return servers

    @model_validator(mode="after")
    def _servers_apart_from_tools(self) -> AgentSpec:
        own = {name.split(".", 1)[0] for name in self.tools}
        clash = sorted(own & {server.name for server in self.mcp_servers})
        if clash:
            raise ValueError(
                f"an MCP server is named as one of the spec's tools ({', '.join(clash)}): "
                "their calls would share names; name the server otherwise"
            )
        return self

    def mcp_server_for(self, call_name: str) -> McpServer | None:
        """The MCP server whose tool `call_name` ("server.tool") is, if it is one."""
        server, dot, _ = call_name.partition(".")
        if not dot:
            return None
        return next((s for s in self.mcp_servers if s.name == server), None)


def _final_states() -> list[_Status]:
    return ["succeeded", "failed", "cancelled", "timed_out"]


class WebhookSpec(BaseModel):
    """Where to tell of the task's state changes, and which ones."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(min_length=8, max_length=2048, description="An http(s) URL to POST to.")
    events: list[_Status] = Field(
        default_factory=_final_states,
        min_length=1, max_length=8,
        description="The states to tell of (default: the final ones).",
    )  # fmt: skip
    format: Literal["standard", "a2a"] = Field(
        default="standard",
        description='The body: Standard Webhooks\' `{"type", "timestamp", "data"}`, or an A2A '
        "push notification (a `StreamResponse` carrying the status update). Both are signed.",
    )
    id: str | None = Field(
        default=None, min_length=1, max_length=256,
        description="The subscriber's name for this subscription (A2A's push config id).",
    )  # fmt: skip
    token: str | None = Field(
        default=None, min_length=1, max_length=1024, pattern=_HEADER_VALUE,
        description="Sent back as `X-A2A-Notification-Token`, for the receiver to check.",
    )  # fmt: skip
    authorization: str | None = Field(
        default=None, min_length=1, max_length=4096, pattern=_HEADER_VALUE,
        description="Sent as the `Authorization` header (`<scheme> <credentials>`).",
    )  # fmt: skip

    @field_validator("url")
    @classmethod
    def _http(cls, url: str) -> str:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("a webhook URL must be http:// or https:// with a host")
        return url
