"""A task's event stream: what happened to it, in order, resumable by entry id.

Each entry of `task:{id}:events` is ``{"kind": ..., "data": <JSON>}``; the Redis entry id is the
SSE event id, so a client that reconnects with `Last-Event-ID` resumes exactly where it dropped.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

import orjson
from pydantic import BaseModel

from taskyard.agentkit.text import replace_lone_surrogates
from taskyard.runtime.task import TERMINAL, TaskStatus

__all__ = ["Event", "EventKind", "decode_entry", "dumps", "encode"]


class EventKind(StrEnum):
    STATUS = "status"  # data: {"status", "reason"?, "result"?}
    MESSAGE = "message"  # data: an AgentMessage
    TOKEN = "token"  # data: {"delta": text, "sender": name} while the model streams
    APPROVAL_REQUESTED = "approval_requested"  # data: {"step", "calls": [{"id", "tool", ...}]}
    APPROVAL_DECIDED = "approval_decided"  # data: {"call_id", "state", "reason"?}
    MEMORY_COMPACTED = "memory_compacted"  # data: {"upto", "before_tokens", "after_tokens"}
    CHILD = "child"  # data: {"task_id", "status"} of a child task (an agent called as a tool)
    # data: a file a tool made, kept with the task: an `Artifact` without its bytes (name,
    # mime, kind, size, width, height, url), and the "call_id" and "step" that made it
    ARTIFACT = "artifact"
    RATE_LIMITED = "rate_limited"  # data: {"reason", "retry_in_s"}: the tenant's model budget


class Event(BaseModel):
    id: str
    kind: EventKind
    data: dict[str, Any]

    @property
    def is_final(self) -> bool:
        """The last event of a task: its terminal status."""
        return self.kind == EventKind.STATUS and TaskStatus(self.data["status"]) in TERMINAL


def dumps(data: Any) -> str:
    """Compact JSON text, as every event and stored message is written. A lone surrogate,
    which no JSON encoder takes, becomes U+FFFD, so a failure's reason can always be told."""
    try:
        return orjson.dumps(data).decode()
    except orjson.JSONEncodeError:
        return orjson.dumps(replace_lone_surrogates(data)).decode()


def encode(kind: EventKind, data: dict[str, Any]) -> dict[str, str]:
    return {"kind": kind.value, "data": dumps(data)}


def decode_entry(entry_id: str, fields: dict[str, str]) -> Event:
    return Event(id=entry_id, kind=EventKind(fields["kind"]), data=orjson.loads(fields["data"]))
