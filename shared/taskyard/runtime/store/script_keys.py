"""The keys each Lua script works on, by name.

They still travel in KEYS (a cluster routes a script by the keys it declares), but each
script's keys are a NamedTuple here, and as the script loads they become a Lua table `KEY`
with the same names (`KEY.task`): neither side counts positions. A last field that is a
tuple holds any number of keys (in Lua, a list: `KEY.memories`).
"""

from __future__ import annotations

from functools import cache
from typing import NamedTuple, get_origin, get_type_hints

__all__ = [
    "AdvanceScheduleKeys",
    "BeginStepKeys",
    "ClaimCallKeys",
    "ClaimRunKeys",
    "CommitStepKeys",
    "CreateScheduleKeys",
    "CreateTaskKeys",
    "DecideApprovalKeys",
    "EndTaskKeys",
    "ForkSessionKeys",
    "LiveTaskKeys",
    "PutToolResultKeys",
    "RecordsKeys",
    "SandboxKeys",
    "SaveCompactionKeys",
    "ScriptKeys",
    "SessionKeys",
    "TaskKeys",
    "WorkerQueueKeys",
    "flat",
    "lua_binding",
    "script_keys",
]

# A NamedTuple of keys (a tuple, to any checker): str fields, the last maybe a tuple of them.
ScriptKeys = tuple[str | tuple[str, ...], ...]


# -- tasks -----------------------------------------------------------------------------------


class TaskKeys(NamedTuple):
    task: str
    events: str


class LiveTaskKeys(NamedTuple):
    task: str  # the task's record (its id and the fields its place in the live index needs)


class SessionKeys(NamedTuple):
    lock: str
    waiting: str  # the tasks queued for the session


class CreateTaskKeys(NamedTuple):
    task: str
    events: str
    lock: str
    waiting: str
    idempotency: str  # the task's own key when there is no idempotency key
    tenant_tasks: str
    session_tasks: str
    tenant_sessions: str
    paths: str  # the session's memory list names
    values: str
    compaction: str
    epoch: str


class EndTaskKeys(NamedTuple):
    task: str
    events: str
    lock: str
    waiting: str


# -- steps -----------------------------------------------------------------------------------


class BeginStepKeys(NamedTuple):
    task: str
    events: str
    results: str  # the previous step's tool results
    epoch: str
    compaction: str
    values: str
    paths: str
    memories: tuple[str, ...]  # in the order of the document's offsets


class CommitStepKeys(NamedTuple):
    task: str
    events: str
    lock: str
    waiting: str
    paths: str
    approvals: str  # the step's calls held for approval
    values: str
    memories: tuple[str, ...]  # in the order of the document's memories


class SaveCompactionKeys(NamedTuple):
    task: str
    compaction: str


# -- tool calls and approvals ----------------------------------------------------------------


class PutToolResultKeys(NamedTuple):
    results: str
    task: str
    events: str
    # For a call run in the session's interpreter (else none): the session's sandbox record
    # and its interpreter cells.
    interpreter: tuple[str, ...]


class ClaimCallKeys(NamedTuple):
    results: str
    claim: str
    task: str  # the task's record: an ended task's call is not run


class ClaimRunKeys(NamedTuple):
    results: str
    claim: str
    task: str
    session: tuple[str, ...]  # the session's sandbox record, for a call that uses it; else none


class DecideApprovalKeys(NamedTuple):
    task: str
    events: str
    approvals: str
    results: str


# -- sessions --------------------------------------------------------------------------------


class ForkSessionKeys(NamedTuple):
    # the source's
    lock: str
    waiting: str
    memory: str  # its top memory list
    paths: str  # its memory list names
    values: str
    compaction: str
    tasks: str
    origin: str  # the session it was forked from
    # the new session's
    new_memory: str
    new_paths: str
    new_values: str
    new_compaction: str
    new_tasks: str
    new_origin: str
    new_lock: str
    new_waiting: str
    new_sandbox: str  # its sandbox record
    new_epoch: str
    tenant_sessions: str


# -- tool workers' sandboxes -----------------------------------------------------------------


class SandboxKeys(NamedTuple):
    record: str  # the session's sandbox record


class RecordsKeys(NamedTuple):
    records: tuple[str, ...]  # sessions' sandbox records


class WorkerQueueKeys(NamedTuple):
    queue: str  # a list of the broker's database


# -- schedules -------------------------------------------------------------------------------


class CreateScheduleKeys(NamedTuple):
    schedule: str
    tenant_schedules: str
    due: str


class AdvanceScheduleKeys(NamedTuple):
    schedule: str
    runs: str
    due: str


_SCRIPTS: dict[str, type[ScriptKeys]] = {
    "approvals/decide_approval": DecideApprovalKeys,
    "sandboxes/claim_session": SandboxKeys,
    "sandboxes/end_sessions": RecordsKeys,
    "sandboxes/hand_over": RecordsKeys,
    "sandboxes/redrive_queue": WorkerQueueKeys,
    "schedules/advance_schedule": AdvanceScheduleKeys,
    "schedules/create_schedule": CreateScheduleKeys,
    "sessions/fork_session": ForkSessionKeys,
    "steps/begin_step": BeginStepKeys,
    "steps/commit_step": CommitStepKeys,
    "steps/save_compaction": SaveCompactionKeys,
    "tasks/create_task": CreateTaskKeys,
    "tasks/end_task": EndTaskKeys,
    "tasks/heal_session": SessionKeys,
    "tasks/look_again": LiveTaskKeys,
    "tasks/publish_live": TaskKeys,
    "tasks/release_session": SessionKeys,
    "tool_calls/claim_call": ClaimCallKeys,
    "tool_calls/claim_run": ClaimRunKeys,
    "tool_calls/put_tool_result": PutToolResultKeys,
}  # a script not here (push_jobs) takes no keys


def script_keys(name: str) -> type[ScriptKeys] | None:
    """The keys type of the script `name` ("steps/begin_step"); None if it takes none."""
    return _SCRIPTS.get(name)


def flat(keys_: ScriptKeys) -> list[str]:
    """The keys as KEYS carries them, in the fields' order."""
    return [k for part in keys_ for k in ((part,) if isinstance(part, str) else part)]


@cache
def lua_binding(keys_type: type[ScriptKeys]) -> str:
    """The Lua line naming KEYS as `keys_type` does: `local KEY = {task = KEYS[1], ...}`."""
    hints = get_type_hints(keys_type)  # in the fields' order
    *singles, last = names = list(hints)
    if any(get_origin(hints[name]) is tuple for name in singles):
        raise TypeError(f"{keys_type.__name__}: only its last field may hold several keys")
    parts = [f"{name} = KEYS[{i}]" for i, name in enumerate(singles, 1)]
    many = get_origin(hints[last]) is tuple
    parts.append(f"{last} = {{unpack(KEYS, {len(names)})}}" if many else
                 f"{last} = KEYS[{len(names)}]")  # fmt: skip
    return f"local KEY = {{{', '.join(parts)}}}\n"
