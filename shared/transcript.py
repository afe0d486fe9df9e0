"""A task's events as a readable live transcript (the CLI and the demo print this)."""

from __future__ import annotations

from shared.events import Event, EventKind
from shared.schema import ActionReturn, AgentMessage

__all__ = ["render_event"]


def render_event(event: Event) -> str | None:
    """One event as text; None for events a reader need not see (token deltas)."""
    if event.kind == EventKind.STATUS:
        extra = event.data.get("error") or ""
        return f"· status: {event.data['status']} {extra}".rstrip()
    if event.kind == EventKind.MESSAGE:
        return _render_message(AgentMessage.model_validate(event.data))
    return None


def _render_message(msg: AgentMessage) -> str:
    if isinstance(msg.content, ActionReturn):
        ret = msg.content
        body = ret.format_result() + (f"\n{ret.errmsg}" if ret.errmsg else "")
        return f"[{msg.sender} output]\n{_indent(body.strip())}"
    calls = msg.formatted.get("tool_calls") if isinstance(msg.formatted, dict) else None
    text = str(msg.content or "").strip()
    lines = [f"[{msg.sender}]", _indent(text)] if text else []
    for call in calls or []:
        params = call.get("parameters", {})
        code = params.get("command") if isinstance(params, dict) else None
        lines.append(f"[{msg.sender} calls {call['name']}]")
        lines.append(_indent(code if code is not None else str(params)))
    return "\n".join(lines) if lines else f"[{msg.sender}] (empty)"


def _indent(text: str) -> str:
    return "\n".join(f"    {line}" for line in text.splitlines()) or "    (empty)"
