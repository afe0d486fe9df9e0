"""The store's Lua scripts: each step-critical change is one atomic round trip to Redis.

The scripts live as `.lua` files under `lua/`, a folder per concern of the store (`tasks/`,
`steps/`, `tool_calls/`, `approvals/`, `sandboxes/`, `schedules/`, `sessions/`), each named by
its path there ("steps/commit_step"); each gets `prelude.lua` (the terminal states, the session
hand-over, the job push, the call's JSON document as `doc`, answers by name) prepended, so
the rules are written once, then its keys by name (`script_keys`); its body runs as a function,
the jobs it pushed are pushed after it.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from taskyard.plumbing import keys
from taskyard.runtime.store.script_keys import lua_binding, script_keys
from taskyard.runtime.task import TERMINAL

__all__ = ["SCRIPTS", "source"]

_DIR = Path(__file__).with_name("lua")
SCRIPTS = tuple(sorted(str(p.relative_to(_DIR).with_suffix("")) for p in _DIR.glob("*/*.lua")))


@cache
def source(name: str) -> str:
    """The script `name`, with the prelude before it (its key names from
    `taskyard.plumbing.keys`) and its keys' names (`KEY`)."""
    prelude = (_DIR / "prelude.lua").read_text()
    for token, value in _NAMES.items():
        prelude = prelude.replace(token, value)
    keys_type = script_keys(name)
    binding = lua_binding(keys_type) if keys_type else ""
    body = (_DIR / f"{name}.lua").read_text()
    # The body runs as a function, so the jobs it pushes go out after it, whichever way it
    # returns (prelude's `flush_jobs`).
    return f"{prelude}{binding}local function body()\n{body}end\n{_THEN_PUSH}"


_THEN_PUSH = "local answer = body()\nflush_jobs()\nreturn answer\n"

_NAMES = {
    "{live}": keys.LIVE_TASKS,
    "{task_prefix}": keys.TASK_PREFIX,
    "{approval_deadlines}": keys.APPROVAL_DEADLINES,
    "{results_key}": keys.task_tool_results("%s", "%s"),
    "{events_key}": keys.task_events("%s"),
    "{children_key}": keys.task_children("%s"),
    "{webhooks_due}": keys.WEBHOOKS_DUE,
    "{sandbox_key}": keys.session_sandbox("%s"),
    "{worker_alive_key}": keys.tool_worker_alive("%s"),
    "{sandbox_host_key}": keys.sandbox_host("%s"),
}


def _check_prelude() -> None:
    # The prelude spells out the terminal states; it must agree with `taskyard.runtime.task`.
    prelude = (_DIR / "prelude.lua").read_text()
    missing = [status.value for status in TERMINAL if f"{status.value} = true" not in prelude]
    if missing:
        raise RuntimeError(f"prelude.lua does not list terminal states {missing}")


_check_prelude()
