"""The aggregator for models with native (OpenAI) tool calling."""

from __future__ import annotations

import json

from taskyard.agentkit.aggregators.default import (
    ChatMessage,
    DefaultAggregator,
    content_text,
)
from taskyard.agentkit.schema import ActionReturn, AgentMessage, ToolCall

__all__ = ["NativeToolAggregator"]


class NativeToolAggregator(DefaultAggregator):
    """Agent turns with ``formatted["tool_calls"]`` become assistant ``tool_calls``; tool results
    (an `ActionReturn` with ``extra_info["tool_call_id"]``) become ``role: "tool"`` messages.

    A tool message whose call is not in the conversation (a `recent_n` window cut it off) is
    dropped (`DefaultAggregator`), since OpenAI-compatible servers reject a tool message
    without its call.
    """

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
