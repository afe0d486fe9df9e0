"""The store's Lua scripts: each step-critical change is one atomic round trip to Redis.

The scripts live as `.lua` files beside this module; each gets `prelude.lua` (the terminal
states, the session hand-over) prepended, so the rules are written once.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from shared import keys
from shared.task import TERMINAL

__all__ = ["SCRIPTS", "source"]

_DIR = Path(__file__).with_name("lua")
SCRIPTS = (
    "advance_schedule",
    "begin_step",
    "claim_call",
    "claim_session",
    "commit_step",
    "create_schedule",
    "create_task",
    "decide_approval",
    "end_sessions",
    "end_task",
    "hand_over",
    "heal_session",
    "publish_live",
    "push_jobs",
    "put_tool_result",
    "redrive_queue",
    "release_claims",
    "release_session",
    "save_compaction",
)


@cache
def source(name: str) -> str:
    """The script `name`, with the prelude before it (its key names from `shared.keys`)."""
    prelude = (_DIR / "prelude.lua").read_text()
    for token, value in _NAMES.items():
        prelude = prelude.replace(token, value)
    return prelude + (_DIR / f"{name}.lua").read_text()


_NAMES = {
    "{live}": keys.LIVE_TASKS,
    "{deadlines}": keys.TASK_DEADLINES,
    "{task_prefix}": keys.TASK_PREFIX,
    "{approval_deadlines}": keys.APPROVAL_DEADLINES,
    "{results_key}": keys.task_tool_results("%s", "%s"),
    "{advanced_key}": keys.task_advanced("%s", "%s"),
    "{events_key}": keys.task_events("%s"),
    "{children_key}": keys.task_children("%s"),
    "{webhooks_due}": keys.WEBHOOKS_DUE,
    "{sandbox_key}": keys.session_sandbox("%s"),
    "{worker_alive_key}": keys.tool_worker_alive("%s"),
    "{session_before_key}": keys.task_session_before("%s"),
}


def _check_prelude() -> None:
    # The prelude spells out the terminal states; it must agree with `shared.task`.
    prelude = (_DIR / "prelude.lua").read_text()
    missing = [status.value for status in TERMINAL if f"{status.value} = true" not in prelude]
    if missing:
        raise RuntimeError(f"prelude.lua does not list terminal states {missing}")


_check_prelude()
