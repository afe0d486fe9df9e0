"""The messages every component exchanges: `AgentMessage` and the action (tool) vocabulary.

Conventions the whole system relies on:

- a model turn is an `AgentMessage` from the agent (``sender == agent.name``); its raw text stays
  in `content` and what the output parser extracted goes into `formatted`. Native tool calls are
  ``formatted = {"tool_calls": [ToolCall dicts]}``;
- a tool result is an `AgentMessage` from the tool (``sender`` = tool name) whose `content` is an
  `ActionReturn` and whose ``extra_info["tool_call_id"]`` names the call it answers.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, WithJsonSchema

from taskyard.files.info import human_size

__all__ = [
    "ActionReturn",
    "ActionStatusCode",
    "ActionValidCode",
    "AgentMessage",
    "AgentStatusCode",
    "Artifact",
    "FunctionCall",
    "LLMResponse",
    "ToolCall",
]


class AgentStatusCode(IntEnum):
    """Where a message stands in its stream; values match Lagent's."""

    END = 0
    STREAM_ING = 1
    SERVER_ERR = -1
    SESSION_CLOSED = -2
    SESSION_OUT_OF_LIMIT = -3
    SESSION_INVALID_ARG = -4
    SESSION_READY = 2
    PLUGIN_START = 3
    PLUGIN_END = 4
    PLUGIN_RETURN = 5
    CODING = 6
    CODE_END = 7
    CODE_RETURN = 8


class ActionStatusCode(IntEnum):
    ING = 1
    SUCCESS = 0
    HTTP_ERROR = -1000
    ARGS_ERROR = -1001
    API_ERROR = -1002


class ActionValidCode(IntEnum):
    FINISH = 1
    OPEN = 0
    CLOSED = -1
    INVALID = -2
    ABSENT = -3


class FunctionCall(BaseModel):
    """A call as a text protocol parser extracts it: a name and its parameters."""

    name: str
    parameters: dict[str, Any] | str = Field(default_factory=dict)


class ToolCall(FunctionCall):
    """A native (OpenAI ``tool_calls``) call: a `FunctionCall` with the id the result must quote."""

    id: str


class LLMResponse(BaseModel):
    """One model turn as an LLM client returns it: the text and any native tool calls."""

    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, int] = Field(default_factory=dict)


class Artifact(BaseModel):
    """A file a tool made for the task (a cell's figure, an HTML table), kept beside the task
    rather than in its messages: the tool worker stores `data` as a file of the task and
    leaves `url`, where the gateway serves it, in its place. The model reads `describe()`."""

    model_config = ConfigDict(extra="forbid")

    name: str
    mime: str
    kind: str = ""  # what made it: "figure", "table", "image", "html"
    size: int = Field(ge=0)
    width: int | None = None
    height: int | None = None
    data: str | None = None  # base64, until the tool worker stores it
    url: str | None = None  # the gateway's path to download it, once stored

    def describe(self) -> str:
        """One line for the model: ``[image: figure-3fa2.png, 640×480]``."""  # noqa: RUF002
        kind = "image" if self.mime.startswith("image/") else self.kind or "file"
        if self.width and self.height:
            return f"[{kind}: {self.name}, {self.width}\u00d7{self.height}]"
        return f"[{kind}: {self.name}, {human_size(self.size)}]"


class ActionReturn(BaseModel):
    """What running an action gave: a result or an error, never an exception."""

    model_config = ConfigDict(extra="forbid")

    # Marks the object in JSON so an `AgentMessage` round trip restores the type (OpenAI style).
    object: Literal["action_return"] = "action_return"
    type: str | None = None
    args: dict[str, Any] | None = None
    url: str | None = None
    result: list[dict[str, Any]] | None = None
    errmsg: str | None = None
    state: ActionStatusCode = ActionStatusCode.SUCCESS
    thought: str | None = None
    valid: ActionValidCode = ActionValidCode.OPEN
    artifacts: list[Artifact] | None = None  # files it made; `result` describes them in text

    def format_result(self) -> str:
        """The result as text for a model: text parts joined, other parts named by type."""
        parts = []
        for item in self.result or []:
            if item.get("type", "text") == "text":
                parts.append(str(item.get("content", "")))
            else:
                parts.append(f"[{item['type']}]({item.get('content', '')})")
        return "\n".join(parts)


def _content_kind(value: Any) -> str:
    # A dict is an ActionReturn only when it says so, so a tool-call dict stays a dict.
    if isinstance(value, ActionReturn):
        return "action_return"
    if isinstance(value, dict):
        return "action_return" if value.get("object") == "action_return" else "dict"
    if value is None:
        return "none"
    return "list" if isinstance(value, list) else "str"


# The JSON schema says what `_content_kind` does, so exactly one branch matches a tool result.
_PLAIN_DICT = WithJsonSchema(
    {
        "type": "object",
        "additionalProperties": True,
        "not": {"required": ["object"], "properties": {"object": {"const": "action_return"}}},
    }
)
MessageContent = Annotated[
    Annotated[str, Tag("str")]
    | Annotated[dict[str, Any], Tag("dict"), _PLAIN_DICT]
    | Annotated[list[Any], Tag("list")]
    | Annotated[ActionReturn, Tag("action_return")]
    | Annotated[None, Tag("none")],
    Discriminator(_content_kind),
]


class AgentMessage(BaseModel):
    """One message between agents, tools, users and services; JSON round trip is lossless."""

    model_config = ConfigDict(extra="forbid")

    content: MessageContent = None
    sender: str = "user"
    formatted: Any = None
    extra_info: Any = None
    type: str | None = None
    receiver: str | None = None
    stream_state: AgentStatusCode = AgentStatusCode.END

    @classmethod
    def tool_result(cls, call: ToolCall, result: ActionReturn) -> AgentMessage:
        """The message answering a native tool call: from the tool, quoting the call's id."""
        return cls(sender=call.name, content=result, extra_info={"tool_call_id": call.id})

    @property
    def tool_calls(self) -> list[ToolCall]:
        """The native tool calls this turn asks for (``formatted["tool_calls"]``)."""
        formatted = self.formatted
        calls = formatted.get("tool_calls") if isinstance(formatted, dict) else None
        return [c if isinstance(c, ToolCall) else ToolCall.model_validate(c) for c in calls or []]

    @property
    def tool_call_id(self) -> str | None:
        """The id of the call this tool result answers (``extra_info["tool_call_id"]``)."""
        extra = self.extra_info
        call_id = extra.get("tool_call_id") if isinstance(extra, dict) else None
        return call_id if isinstance(call_id, str) else None

    @property
    def usage(self) -> dict[str, int]:
        """The model's token usage for this turn (``extra_info["usage"]``), or empty."""
        extra = self.extra_info
        usage = extra.get("usage") if isinstance(extra, dict) else None
        return {k: v for k, v in (usage or {}).items() if isinstance(v, int)}
