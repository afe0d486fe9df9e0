"""The live transcript: streamed tokens printed once, tool calls and outputs shown."""

from __future__ import annotations

import io

from taskyard.agentkit.schema import ActionReturn, AgentMessage
from taskyard.client.cli.transcript import TranscriptPrinter
from taskyard.runtime.events import Event, EventKind


def _event(n: int, kind: EventKind, data: dict) -> Event:
    return Event(id=f"{n}-0", kind=kind, data=data)


def _message(n: int, message: AgentMessage) -> Event:
    return _event(n, EventKind.MESSAGE, message.model_dump(mode="json"))


def test_tokens_stream_and_the_turn_adds_only_its_tool_calls() -> None:
    out = io.StringIO()
    show = TranscriptPrinter(out)
    call = {"id": "c1", "name": "IPythonInterpreter", "parameters": {"command": "print(1)"}}
    events = [
        _event(1, EventKind.TOKEN, {"delta": "Let me ", "sender": "assistant"}),
        _event(2, EventKind.TOKEN, {"delta": "compute.", "sender": "assistant"}),
        _message(
            3,
            AgentMessage(
                sender="assistant", content="Let me compute.", formatted={"tool_calls": [call]}
            ),
        ),
        _message(
            4,
            AgentMessage(
                sender="IPythonInterpreter",
                content=ActionReturn(result=[{"type": "text", "content": "1"}]),
                extra_info={"tool_call_id": "c1"},
            ),
        ),
        _event(5, EventKind.STATUS, {"status": "failed", "error": "max_steps (1) reached"}),
    ]
    for event in events:
        show(event)
    assert out.getvalue() == (
        "[assistant]\n    Let me compute.\n"
        "[assistant calls IPythonInterpreter]\n    print(1)\n"
        "[IPythonInterpreter output]\n    1\n"
        "· status: failed max_steps (1) reached\n"
    )


def test_unstreamed_message_text_is_shown() -> None:
    out = io.StringIO()
    TranscriptPrinter(out)(_message(1, AgentMessage(content="two\nlines")))
    assert out.getvalue() == "[user]\n    two\n    lines\n"


def test_a_rate_limited_wait_says_why() -> None:
    out = io.StringIO()
    reason = "model call failed: 429 request rate limit (1 requests per 60s) of tenant 'b' reached"
    TranscriptPrinter(out)(
        _event(1, EventKind.RATE_LIMITED, {"reason": reason, "retry_in_s": 12.5})
    )
    assert out.getvalue() == f"· waiting: {reason}; trying again in 12.5s\n"
