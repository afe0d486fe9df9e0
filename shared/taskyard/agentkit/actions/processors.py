"""Action processors: hooks that translate between a model's message and the executor.

`before_action` turns what the output parser put in `formatted` into the executor's call form;
`after_action` puts the text the model should read into the result's `formatted`, keeping the
`ActionReturn` in `content`.
"""

from __future__ import annotations

from typing import Any

from taskyard.agentkit.hooks import ActionHook, HookedExecutor
from taskyard.agentkit.parsers.base import ToolStatusCode
from taskyard.agentkit.schema import ActionReturn, ActionStatusCode, AgentMessage, FunctionCall

__all__ = ["ActionProcessor", "InternLMActionProcessor"]


class ActionProcessor(ActionHook):
    """Reads a call from `formatted`: a `FunctionCall`, a ``{"name", "parameters"}`` dict, or a
    `ToolParse` whose action is such a dict. A parse error or a missing call is passed on as
    text, which the executor answers with an ARGS_ERROR the model can read."""

    def before_action(
        self, executor: HookedExecutor, message: AgentMessage, session_id: str
    ) -> AgentMessage:
        return message.model_copy(update={"content": self.call_of(message.formatted)})

    def after_action(
        self, executor: HookedExecutor, message: AgentMessage, session_id: str
    ) -> AgentMessage:
        ret = message.content
        if not isinstance(ret, ActionReturn):
            return message
        text = ret.format_result() if ret.state == ActionStatusCode.SUCCESS else ret.errmsg
        return message.model_copy(update={"formatted": text or ""})

    def call_of(self, formatted: Any) -> dict[str, Any] | str:
        """The executor's call form of `formatted`, or text saying why there is none."""
        if isinstance(formatted, FunctionCall):
            return formatted.model_dump()
        if _is_call(formatted):
            return dict(formatted)
        if isinstance(formatted, dict) and "status" in formatted:  # a ToolParse
            if formatted["status"] == ToolStatusCode.PARSING_ERROR:
                return formatted.get("error") or f"could not read the call {formatted['action']!r}"
            if formatted["status"] == ToolStatusCode.VALID_TOOL and _is_call(formatted["action"]):
                return dict(formatted["action"])
        return f"the message holds no tool call (formatted: {formatted!r})"


class InternLMActionProcessor(ActionProcessor):
    """Also reads InternLM's interpreter calls, whose action is bare code: they become a call
    of `code_tool` with the code as `code_parameter`. (Lagent takes the first registered
    action as the code tool; naming it avoids running code through whatever comes first.)"""

    def __init__(
        self, code_tool: str = "IPythonInterpreter", code_parameter: str = "command"
    ) -> None:
        self.code_tool = code_tool
        self.code_parameter = code_parameter

    def call_of(self, formatted: Any) -> dict[str, Any] | str:
        if (
            isinstance(formatted, dict)
            and formatted.get("status") == ToolStatusCode.VALID_TOOL
            and isinstance(formatted.get("action"), str)
        ):
            return {
                "name": self.code_tool,
                "parameters": {self.code_parameter: formatted["action"]},
            }
        return super().call_of(formatted)


def _is_call(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("name"), str) and "parameters" in value
