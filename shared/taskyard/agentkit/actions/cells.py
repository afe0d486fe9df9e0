"""What `IPythonInterpreter` remembers of a session's cells, so that after its interpreter's
state was lost the model can ask for them to be run again (``%replay``).

Only cells that ran to the end without an error are kept, in order, per interpreter: when the
session's interpreter is replaced, its cells are set aside for one replay. A replay runs them
again in the fresh interpreter; it rebuilds what running them again rebuilds (time,
randomness and outside data may differ), it restores no snapshot. The tool worker keeps the
cells in Redis (`services/tool_worker/cells.py`), so the replay works wherever the session's
next call runs.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["CellLog"]


class CellLog(Protocol):
    """A session's recorded cells, by session key."""

    def ran(self, session_key: str, code: str) -> None:
        """A cell ran to the end, without an error, in the session's current interpreter."""
        ...

    def restarted(self, session_key: str) -> int:
        """The session's interpreter was replaced: set its cells aside for a replay (those
        set aside before go); how many."""
        ...

    def take_replay(self, session_key: str) -> list[str]:
        """The cells set aside at the last restart, oldest first; they are no longer kept."""
        ...
