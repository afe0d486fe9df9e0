"""The script: which deterministic turn the scripted model gives for a chat request.

Pure functions over the request's messages and tools, so the HTTP layer only encodes the turn.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from devstack.scripted_model.browsing import (
    OPEN_TOOL,
    SEARCH_TOOL,
    first_result_url,
    quote_page,
    search_query,
)
from devstack.scripted_model.programs import program_for

__all__ = ["CODE_TOOL", "ScriptedTurn", "ToolCallTurn", "chat_turn", "echo_text", "message_text"]

CODE_TOOL = "IPythonInterpreter"
_LABEL = "(scripted model)"
_ERROR_MARKERS = ("Traceback", "Error")
_ECHO_LIMIT = 200
# A user message may script any offered tool's call: ```tool {"name": ..., "arguments": {...}}```;
# several such fences, one call a turn in order.
_TOOL_FENCE = re.compile(r"```tool\s*\n(.*?)```", re.DOTALL)
# "repeat N times" in the user's message: call the code tool N times before answering (long
# workflows for tests and benchmarks).
_REPEAT = re.compile(r"\brepeat (\d+) times\b", re.IGNORECASE)
# A system prompt asking to count the messages: the answer says how many the model was sent
# (besides system messages), so a test sees what an agent's memory held.
_COUNT = re.compile(r"\bcount the messages\b", re.IGNORECASE)


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
    """The scripted answer to a chat: call a tool (the web search, the code tool), take the
    next step after a tool's result or quote it, or echo."""
    last = messages[-1] if messages else {}
    role = last.get("role")
    offered = _tool_names(tools)
    if role == "tool":
        return (
            _next_fenced_call(messages, offered)
            or _repeat_call(messages, offered)
            or _after_tool(messages, offered)
        )
    scripted = _fenced_tool_call(message_text(last), offered)
    if role == "user" and scripted is not None:
        return ScriptedTurn(tool_call=scripted)
    query = search_query(message_text(last)) if SEARCH_TOOL in offered else None
    if role == "user" and query is not None:
        return ScriptedTurn(tool_call=ToolCallTurn(SEARCH_TOOL, json.dumps({"query": query})))
    if role == "user" and CODE_TOOL in offered:
        arguments = json.dumps({"command": program_for(message_text(last))})
        return ScriptedTurn(tool_call=ToolCallTurn(CODE_TOOL, arguments))
    if _asks_to_count(messages):
        seen = sum(m.get("role") != "system" for m in messages)
        return ScriptedTurn(text=f"[{seen} messages] {echo_text(message_text(last))}")
    return ScriptedTurn(text=echo_text(message_text(last)))


def _asks_to_count(messages: list[dict[str, Any]]) -> bool:
    system = [message_text(m) for m in messages if m.get("role") == "system"]
    return any(_COUNT.search(text) for text in system)


def _repeat_call(messages: list[dict[str, Any]], offered: set[str]) -> ScriptedTurn | None:
    """Call the code tool again while the user asked for more calls than were made."""
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    if not users or CODE_TOOL not in offered:
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


def _after_tool(messages: list[dict[str, Any]], offered: set[str]) -> ScriptedTurn:
    """After a search, open its first result; after opening a page, quote it; else quote."""
    last = messages[-1]
    output = message_text(last).strip()
    called = _called_tool(messages, last.get("tool_call_id"))
    url = first_result_url(output) if called == SEARCH_TOOL else None
    if url is not None and OPEN_TOOL in offered:
        return ScriptedTurn(tool_call=ToolCallTurn(OPEN_TOOL, json.dumps({"url": url})))
    if called == OPEN_TOOL and not output.startswith(("http://", "https://")):
        return ScriptedTurn(text=f"The tool reported an error: {output} {_LABEL}")
    if called == OPEN_TOOL:
        return ScriptedTurn(text=f"{quote_page(output)} {_LABEL}")
    return ScriptedTurn(text=_quote_tool_output(output))


def _called_tool(messages: list[dict[str, Any]], call_id: Any) -> str | None:
    """The name of the function the assistant called under `call_id`."""
    for message in reversed(messages):
        for call in message.get("tool_calls") or []:
            if isinstance(call, dict) and call.get("id") == call_id:
                return (call.get("function") or {}).get("name")
    return None


def _next_fenced_call(messages: list[dict[str, Any]], offered: set[str]) -> ScriptedTurn | None:
    """The user's next scripted call, where their message spelt out several (one a turn, in
    order, each after the last one's result)."""
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    if not users:
        return None
    fences = _TOOL_FENCE.findall(message_text(messages[users[-1]]))
    made = sum(m.get("role") == "tool" for m in messages[users[-1] :])
    if made >= len(fences):
        return None
    call = _fenced_tool_call(f"```tool\n{fences[made]}```", offered)
    return None if call is None else ScriptedTurn(tool_call=call)


def _fenced_tool_call(text: str, offered: set[str]) -> ToolCallTurn | None:
    """The call the first ```tool fence spells out, if it names an offered tool."""
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
        name = function.get("name") if isinstance(function, dict) else None
        if isinstance(name, str):
            names.add(name)
    return names


def _quote_tool_output(output: str) -> str:
    output = output.strip()
    if any(marker in output for marker in _ERROR_MARKERS):
        return f"The tool reported an error: {output} {_LABEL}"
    return f"The result is: {output} {_LABEL}"
