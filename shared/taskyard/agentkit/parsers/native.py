"""Native (OpenAI ``tool_calls``) tool calls: the model server already split the calls out."""

from __future__ import annotations

import json
from typing import Any

from taskyard.agentkit.parsers.base import OutputParser
from taskyard.agentkit.schema import LLMResponse

__all__ = ["NativeToolCallParser", "decode_arguments"]


class NativeToolCallParser(OutputParser):
    """Reads the tool calls of an `LLMResponse` into ``{"tool_calls": [ToolCall dicts]}``.

    Arguments a client left as a JSON string are decoded. Arguments that are not a JSON object
    stay as their raw text, and the turn also gets ``"errors"``: one readable line per bad call.
    The call is kept, so the executor answers its id with an ARGS_ERROR the model can see.
    Plain text (no tool calls) parses to None.
    """

    def parse_response(self, response: str | LLMResponse) -> dict[str, Any] | None:
        if isinstance(response, str) or not response.tool_calls:
            return None
        calls, errors = [], []
        for call in response.tool_calls:
            parameters, error = decode_arguments(call.parameters)
            calls.append(call.model_copy(update={"parameters": parameters}).model_dump())
            if error:
                errors.append(f"tool call {call.id} ({call.name}): {error}")
        return {"tool_calls": calls, "errors": errors} if errors else {"tool_calls": calls}


def decode_arguments(parameters: dict[str, Any] | str) -> tuple[dict[str, Any] | str, str | None]:
    """Arguments as a dict, or the raw text and why it is not a JSON object."""
    if isinstance(parameters, dict):
        return parameters, None
    if not parameters.strip():
        return {}, None  # some servers send "" for a call without arguments
    try:
        decoded = json.loads(parameters)
    except json.JSONDecodeError as exc:
        return parameters, f"arguments are not valid JSON ({exc}): {parameters!r}"
    if not isinstance(decoded, dict):
        return parameters, f"arguments must be a JSON object, got {parameters!r}"
    return decoded, None
