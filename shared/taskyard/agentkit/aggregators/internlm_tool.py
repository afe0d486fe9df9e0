"""InternLM's chat format for text-protocol tools, as Lagent's ``InternLMToolAggregator``.

For agents whose `output_format` is a `ToolParser` (`PluginParser`, `InterpreterParser`, a
`MixedToolParser` of them) and whose tool results come back through an executor::

    agent = Agent(llm, output_format=PluginParser(...), aggregator=InternLMToolAggregator())
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from taskyard.agentkit.aggregators.default import (
    ChatMessage,
    DefaultAggregator,
    SystemPrompt,
    content_text,
)
from taskyard.agentkit.parsers.base import OutputParser
from taskyard.agentkit.parsers.tool import ToolParse, is_parse_error
from taskyard.agentkit.schema import ActionReturn, AgentMessage

__all__ = ["InternLMToolAggregator"]


class InternLMToolAggregator(DefaultAggregator):
    """Memory to InternLM-style chat messages:

    - the parser's instruction is a system message of its own, named after the parser's tool
      type (``{"role": "system", "name": "plugin", ...}``);
    - the agent's turns are written again from `formatted` by the parser's `format_response`,
      so every call shows its end marker (a stop word often cuts it off). A turn whose call
      could not be parsed (PARSING_ERROR) is left out, so the model is not shown its broken
      call again; the error result that follows it still is;
    - tool results (content an `ActionReturn`) are `environment_role` messages, wrapped in
      `environment_begin` / `environment_end` and named after the tool type of the call they
      answer;
    - every other message is user text.

    Few-shot examples come from composing it with `FewShotAggregator`:
    ``class FewShotInternLM(FewShotAggregator, InternLMToolAggregator)``.
    """

    # Class defaults too, so a subclass whose __init__ does not reach this one still works.
    environment_role = "environment"
    environment_begin = ""
    environment_end = ""

    def __init__(
        self,
        environment_role: str = "environment",
        environment_begin: str = "",
        environment_end: str = "",
    ) -> None:
        self.environment_role = environment_role
        self.environment_begin = environment_begin
        self.environment_end = environment_end

    def aggregate(
        self,
        messages: Sequence[AgentMessage],
        name: str,
        parser: OutputParser | None = None,
        system_prompt: SystemPrompt | None = None,
    ) -> list[ChatMessage]:
        chat = self.system_messages(system_prompt, parser)
        tool_type: str | None = None  # of the agent's last call: it names the results
        for message in messages:
            if message.sender == name and is_parse_error(message.formatted):
                continue
            if message.sender == name:
                tool_type = _tool_type(message.formatted, tool_type)
                entry = {"role": "assistant", "content": _turn_text(message, parser)}
            elif isinstance(message.content, ActionReturn):
                entry = self._environment(message.content, tool_type)
            else:
                entry = {"role": "user", "content": content_text(message.content)}
            self._append(chat, entry)
        return chat

    def system_messages(
        self, system_prompt: SystemPrompt | None, parser: OutputParser | None
    ) -> list[ChatMessage]:
        chat = super().system_messages(system_prompt, None)
        instruction = parser.format_instruction() if parser else None
        if instruction:
            entry = {"role": "system", "content": instruction}
            if tool_type := getattr(parser, "tool_type", None):
                entry["name"] = tool_type
            chat.append(entry)
        return chat

    def _environment(self, result: ActionReturn, tool_type: str | None) -> ChatMessage:
        text = f"{self.environment_begin}{content_text(result)}{self.environment_end}"
        entry = {"role": self.environment_role, "content": text}
        if tool_type:
            entry["name"] = tool_type
        return entry


def _is_tool_parse(formatted: Any) -> bool:
    return isinstance(formatted, dict) and {"tool_type", "thought", "action", "status"} <= set(
        formatted
    )


def _tool_type(formatted: Any, last: str | None) -> str | None:
    return formatted["tool_type"] if _is_tool_parse(formatted) else last


def _turn_text(message: AgentMessage, parser: OutputParser | None) -> str:
    # A `ToolParser`'s (or a mix of them): the turn written again from its parse.
    format_response: Callable[[ToolParse], str] | None = getattr(parser, "format_response", None)
    if format_response is not None and _is_tool_parse(message.formatted):
        return format_response(message.formatted)
    return content_text(message.content)
