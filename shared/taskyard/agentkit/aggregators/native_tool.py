"""The aggregator for models with native (OpenAI) tool calling."""

from __future__ import annotations

import json
from collections.abc import Sequence

from taskyard.agentkit.aggregators.default import (
    ChatMessage,
    DefaultAggregator,
    SystemPrompt,
    content_text,
)
from taskyard.agentkit.parsers.base import OutputParser
from taskyard.agentkit.schema import ActionReturn, AgentMessage, ToolCall

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
        calls = [_wire_call(c) for c in message.tool_calls] if message.sender == name else []
        if calls:
            text = content_text(message.content)
            return [{"role": "assistant", "content": text or None, "tool_calls": calls}]
        call_id = message.tool_call_id
        if call_id is not None and isinstance(message.content, ActionReturn):
            return [
                {"role": "tool", "tool_call_id": call_id, "content": content_text(message.content)}
            ]
        return super().render(message, name)


def _wire_call(call: ToolCall) -> ChatMessage:
    parameters = call.parameters
    arguments = parameters if isinstance(parameters, str) else json.dumps(parameters)
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": arguments},
    }


def _drop_orphan_results(chat: list[ChatMessage]) -> list[ChatMessage]:
    announced: set[str] = set()
    kept = []
    for entry in chat:
        calls = entry.get("tool_calls")
        if calls:
            announced.update(call["id"] for call in calls)
        if entry["role"] != "tool" or entry["tool_call_id"] in announced:
            kept.append(entry)
    return kept
