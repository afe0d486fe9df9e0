"""A call held for a person's decision, as a task shows it, and the decision's answer."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

__all__ = ["ApprovalDecided", "ApprovalPublic"]


class ApprovalPublic(BaseModel):
    """A call of the task's current step held for a person's decision, and that decision."""

    call_id: str
    tool: str
    arguments: dict[str, Any] | str
    state: Literal["pending", "approved", "denied"]
    reason: str | None = None

    @classmethod
    def of(cls, call_id: str, held: dict[str, Any]) -> ApprovalPublic:
        call = held["call"]
        return cls(call_id=call_id, tool=call["name"], arguments=call.get("parameters", {}),
                   state=held["state"], reason=held.get("reason"))  # fmt: skip


class ApprovalDecided(BaseModel):
    call_id: str
    state: Literal["approved", "denied"]
