"""A task's events as a readable live transcript (the CLI and the demo print this).

The model's text arrives token by token and is printed as it comes; the turn's message that
follows then adds only what the tokens did not show (its tool calls)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TextIO

from taskyard.agentkit.schema import ActionReturn, AgentMessage, Artifact
from taskyard.runtime.events import Event, EventKind

__all__ = ["TranscriptPrinter"]


@dataclass
class TranscriptPrinter:
    out: TextIO
    _streaming: bool = False  # tokens of the current model turn have been printed

    def __call__(self, event: Event) -> None:
        if event.kind == EventKind.TOKEN:
            self._token(event.data["delta"], event.data.get("sender", "model"))
            return
        streamed, self._streaming = self._streaming, False
        if streamed:
            self.out.write("\n")
        if event.kind == EventKind.STATUS:
            extra = event.data.get("error") or ""
            self._line(f"· status: {event.data['status']} {extra}".rstrip())
        elif event.kind == EventKind.MESSAGE:
            self._line(_render(AgentMessage.model_validate(event.data), skip_text=streamed))
        elif event.kind == EventKind.APPROVAL_REQUESTED:
            for call in event.data["calls"]:
                self._line(f"[approval needed: {call['tool']} call {call['id']}]")
        elif event.kind == EventKind.APPROVAL_DECIDED:
            reason = f": {event.data['reason']}" if event.data.get("reason") else ""
            self._line(f"[call {event.data['call_id']} {event.data['state']}{reason}]")
        elif event.kind == EventKind.ARTIFACT:
            artifact = Artifact.model_validate(_artifact_fields(event.data))
            self._line(f"· artifact {artifact.describe()} at {artifact.url}")
        elif event.kind == EventKind.RATE_LIMITED:
            wait = f"; trying again in {event.data['retry_in_s']:g}s"
            self._line(f"· waiting: {event.data['reason']}{wait}")

    def _token(self, delta: str, sender: str) -> None:
        if not self._streaming:
            self.out.write(f"[{sender}]\n    ")
            self._streaming = True
        self.out.write(delta.replace("\n", "\n    "))
        self.out.flush()

    def _line(self, text: str) -> None:
        if text:
            self.out.write(text + "\n")
            self.out.flush()


def _render(msg: AgentMessage, skip_text: bool) -> str:
    if isinstance(msg.content, ActionReturn):
        ret = msg.content
        body = ret.format_result() + (f"\n{ret.errmsg}" if ret.errmsg else "")
        return f"[{msg.sender} output]\n{_indent(body.strip())}"
    text = "" if skip_text else str(msg.content or "").strip()
    lines = [f"[{msg.sender}]", _indent(text)] if text else []
    for call in msg.tool_calls:
        params = call.parameters
        code = params.get("command") if isinstance(params, dict) else None
        lines.append(f"[{msg.sender} calls {call.name}]")
        lines.append(_indent(code if code is not None else str(params)))
    return "\n".join(lines)


def _artifact_fields(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k in Artifact.model_fields}


def _indent(text: str) -> str:
    return "\n".join(f"    {line}" for line in text.splitlines()) or "    (empty)"
