"""The script: which deterministic turn the scripted model gives for a chat request.

Pure functions over the request's messages and tools, so the HTTP layer only encodes the turn.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from services.scripted_model.programs import program_for

__all__ = ["CODE_TOOL", "ScriptedTurn", "ToolCallTurn", "chat_turn", "echo_text", "message_text"]

CODE_TOOL = "IPythonInterpreter"
_LABEL = "(scripted model)"
_ERROR_MARKERS = ("Traceback", "Error")
_ECHO_LIMIT = 200
# A user message may script any offered tool's call: ```tool {"name": ..., "arguments": {...}}```
_TOOL_FENCE = re.compile(r"```tool\s*\n(.*?)```", re.DOTALL)
# "repeat N times" in the user's message: call the code tool N times before answering (long
# workflows for tests and benchmarks).
_REPEAT = re.compile(r"\brepeat (\d+) times\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class ToolCallTurn:
    """A native tool call: the function's name and its JSON arguments."""

    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class ScriptedTurn:
    """What the model says: text, or a tool call (then `text` is empty)."""

    text: str = ""
    tool_call: ToolCallTurn | None = None


def chat_turn(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> ScriptedTurn:
    """The scripted answer to a chat: call the code tool, quote its result, or echo."""
    last = messages[-1] if messages else {}
    role = last.get("role")
    if role == "tool":
        again = _repeat_call(messages, tools)
        return again or ScriptedTurn(text=_quote_tool_output(message_text(last)))
    scripted = _fenced_tool_call(message_text(last), _tool_names(tools))
    if role == "user" and scripted is not None:
        return ScriptedTurn(tool_call=scripted)
    if role == "user" and CODE_TOOL in _tool_names(tools):
        arguments = json.dumps({"command": program_for(message_text(last))})
        return ScriptedTurn(tool_call=ToolCallTurn(CODE_TOOL, arguments))
    return ScriptedTurn(text=echo_text(message_text(last)))


def _repeat_call(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
) -> ScriptedTurn | None:
    """Call the code tool again while the user asked for more calls than were made."""
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    if not users or CODE_TOOL not in _tool_names(tools):
        return None
    asked = message_text(messages[users[-1]])
    match = _REPEAT.search(asked)
    made = sum(m.get("role") == "tool" for m in messages[users[-1] :])
    if match is None or made >= int(match.group(1)):
        return None
    arguments = json.dumps({"command": program_for(asked)})
    return ScriptedTurn(tool_call=ToolCallTurn(CODE_TOOL, arguments))


def echo_text(prompt: str) -> str:
    """The deterministic plain answer: the prompt's start echoed back, labelled scripted."""
    quoted = " ".join(prompt.split())[:_ECHO_LIMIT]
    return f"You said: {quoted} {_LABEL}"


def message_text(message: dict[str, Any]) -> str:
    """A message's text, whether `content` is a string or a list of OpenAI content parts."""
    content = message.get("content")
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return "" if content is None else str(content)


def _fenced_tool_call(text: str, offered: set[str]) -> ToolCallTurn | None:
    """The call a ```tool fence spells out, if it names an offered tool."""
    match = _TOOL_FENCE.search(text)
    if match is None:
        return None
    try:
        call = json.loads(match.group(1))
    except json.JSONDecodeError:
        return None
    if not isinstance(call, dict) or call.get("name") not in offered:
        return None
    return ToolCallTurn(call["name"], json.dumps(call.get("arguments", {})))


def _tool_names(tools: list[dict[str, Any]] | None) -> set[str]:
    names = set()
    for tool in tools or []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict):
            names.add(function.get("name"))
    return names


def _quote_tool_output(output: str) -> str:
    output = output.strip()
    if any(marker in output for marker in _ERROR_MARKERS):
        return f"The tool reported an error: {output} {_LABEL}"
    return f"The result is: {output} {_LABEL}"
