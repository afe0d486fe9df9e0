"""The aggregator for models with native (OpenAI) tool calling."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from shared.aggregators.default import ChatMessage, DefaultAggregator, SystemPrompt, content_text
from shared.parsers.base import OutputParser
from shared.schema import ActionReturn, AgentMessage

__all__ = ["NativeToolAggregator"]


class NativeToolAggregator(DefaultAggregator):
    """Agent turns with ``formatted["tool_calls"]`` become assistant ``tool_calls``; tool results
    (an `ActionReturn` with ``extra_info["tool_call_id"]``) become ``role: "tool"`` messages.

    A tool message whose call is not in the conversation (a `recent_n` window cut it off) is
    dropped, since OpenAI-compatible servers reject a tool message without its call.
    """

    def aggregate(
        self,
        messages: Sequence[AgentMessage],
        name: str,
        parser: OutputParser | None = None,
        system_prompt: SystemPrompt | None = None,
    ) -> list[ChatMessage]:
        return _drop_orphan_results(super().aggregate(messages, name, parser, system_prompt))

    def render(self, message: AgentMessage, name: str) -> list[ChatMessage]:
        calls = _tool_calls(message) if message.sender == name else []
        if calls:
            text = content_text(message.content)
            return [{"role": "assistant", "content": text or None, "tool_calls": calls}]
        call_id = _tool_call_id(message)
        if call_id is not None:
            return [
                {"role": "tool", "tool_call_id": call_id, "content": content_text(message.content)}
            ]
        return super().render(message, name)


def _tool_calls(message: AgentMessage) -> list[ChatMessage]:
    formatted = message.formatted
    calls = formatted.get("tool_calls") if isinstance(formatted, dict) else None
    return [_wire_call(call) for call in calls or []]


def _wire_call(call: dict[str, Any]) -> ChatMessage:
    parameters = call.get("parameters", {})
    arguments = parameters if isinstance(parameters, str) else json.dumps(parameters)
    return {
        "id": call["id"],
        "type": "function",
        "function": {"name": call["name"], "arguments": arguments},
    }


def _tool_call_id(message: AgentMessage) -> str | None:
    if not isinstance(message.content, ActionReturn) or not isinstance(message.extra_info, dict):
        return None
    return message.extra_info.get("tool_call_id")


def _drop_orphan_results(chat: list[ChatMessage]) -> list[ChatMessage]:
    announced: set[str] = set()
    kept = []
    for entry in chat:
        announced.update(call["id"] for call in entry.get("tool_calls", []))
        if entry["role"] != "tool" or entry["tool_call_id"] in announced:
            kept.append(entry)
    return kept
