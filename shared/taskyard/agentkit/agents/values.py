"""`SessionValues`: what an agent keeps per session besides its messages (a plan, a round
counter, which expert spoke last), as JSON values.

Assigned as an attribute, it joins the agent tree's `state_dict` under the attribute's dotted
name, as memories do (``self.notes = SessionValues(round=0)`` gives ``"notes"``, or
``"planner.notes"`` on a sub-agent), so it is saved, restored and reset with the session. In
the services it round-trips through Redis between steps with the memories.
"""

from __future__ import annotations

import copy
from typing import Any

import orjson

from taskyard.agentkit.memory import SessionId

__all__ = ["SessionValues"]


class SessionValues:
    """Per-session dicts of JSON values, each started from a copy of `defaults`.

    ``self.notes.get(session_id)["round"] += 1`` changes the session's values in place.
    """

    def __init__(self, **defaults: Any) -> None:
        self.defaults = _json_copy(defaults, "SessionValues defaults")
        self.sessions: dict[SessionId, dict[str, Any]] = {}

    def get(self, session_id: SessionId = 0) -> dict[str, Any]:
        """The session's values, made from the defaults on first use; edit them in place."""
        values = self.sessions.get(session_id)
        if values is None:
            values = self.sessions[session_id] = copy.deepcopy(self.defaults)
        return values

    def save(self, session_id: SessionId = 0) -> dict[str, Any]:
        """A JSON copy of the session's values (the defaults for a session it does not hold);
        `TypeError` names a value that is not JSON, which could not be restored."""
        values = self.sessions.get(session_id, self.defaults)
        return _json_copy(values, f"the values of session {session_id!r}")

    def load(self, state: Any, session_id: SessionId = 0) -> None:
        """Replace the session's values with saved ones (a dict from `save`)."""
        if not isinstance(state, dict):
            raise TypeError(f"saved session values are a dict, not {type(state).__name__}")
        self.sessions[session_id] = _json_copy(state, "saved session values")

    def reset(self, session_id: SessionId = 0) -> None:
        """Forget the session: it starts from the defaults again."""
        self.sessions.pop(session_id, None)

    def __contains__(self, session_id: object) -> bool:
        return session_id in self.sessions

    def __repr__(self) -> str:
        return f"SessionValues({len(self.sessions)} sessions)"


def _json_copy(values: dict[str, Any], what: str) -> dict[str, Any]:
    # A JSON round trip: what is saved is exactly what Redis gives back later.
    try:
        copied: dict[str, Any] = orjson.loads(orjson.dumps(values))  # a dict comes back one
        return copied
    except TypeError as exc:
        raise TypeError(f"{what} must be JSON (dicts, lists, str, numbers, bools): {exc}") from None
