"""The one JSON document each Lua script is called with (ARGV[1]; its keys stay in KEYS, as
Redis wants them for a cluster, named in `script_keys`), typed here in one place. The scripts
read it by name as `doc`. Values the scripts write to Redis or compare with what they read
there (steps, times) are strings: a Lua number goes back to Redis with fewer digits than
Python wrote. Optional parts are left out, not null: a missing key reads as nil in Lua, a
null as cjson.null."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NotRequired, TypedDict

from taskyard.runtime.jobs import Envelope

__all__ = [
    "AdvanceScheduleDoc",
    "BeginStepDoc",
    "CellsDoc",
    "ClaimCallDoc",
    "ClaimRunDoc",
    "ClaimSessionDoc",
    "CommitStepDoc",
    "CreateScheduleDoc",
    "CreateTaskDoc",
    "DatabasesDoc",
    "DecideApprovalDoc",
    "EndSessionsDoc",
    "EndTaskDoc",
    "EventDoc",
    "ForkSessionDoc",
    "HandOverDoc",
    "HeirDoc",
    "InterpreterUseDoc",
    "JobDoc",
    "PublishDoc",
    "PushJobsDoc",
    "PutToolResultDoc",
    "RedriveQueueDoc",
    "ReleaseSessionDoc",
    "SaveCompactionDoc",
    "jobs",
]


class JobDoc(TypedDict):
    """A job as the scripts push it: its queue, the session it sticks to ('' for none) and
    kombu's message."""

    queue: str
    sticky: str
    message: str


def jobs(envelopes: Sequence[Envelope | None]) -> list[JobDoc]:
    """The envelopes as the scripts take them (a None left out)."""
    return [JobDoc(queue=e.queue, sticky=e.sticky, message=e.message) for e in envelopes if e]


class DatabasesDoc(TypedDict):
    """The store's database and the broker's: a script pushing jobs selects the one, then
    the other."""

    store_db: int
    broker_db: int


class EventDoc(TypedDict):
    kind: str
    data: str  # JSON


# -- tasks -----------------------------------------------------------------------------------


class CreateTaskDoc(DatabasesDoc):
    task_id: str
    queued: str  # the queued status event's data
    fingerprint: str  # '' without an idempotency key
    key_ttl_s: int
    busy: str
    first_step: list[JobDoc]  # none or one
    asked: str  # the user's message event data
    parent_id: str  # '' for none
    fields: dict[str, str]  # with created_at, deadline_s and stall_s


class EndTaskDoc(DatabasesDoc):
    task_id: str
    status: str
    event: str  # the status event's data
    why: str  # what a parent task's call reads
    fields: dict[str, str]


class ReleaseSessionDoc(DatabasesDoc):
    task_id: str


class PublishDoc(TypedDict):
    kind: str
    data: str


class PushJobsDoc(DatabasesDoc):
    jobs: list[JobDoc]


# -- steps -----------------------------------------------------------------------------------


class BeginStepDoc(DatabasesDoc):
    step: str
    running: str  # the running status event's data
    updated_at: str
    epoch: str  # the session epoch the caller's copy is of
    offsets: list[int]  # per memory list, how many messages the caller holds


class CommitStepDoc(DatabasesDoc):
    step: str
    status: str
    ends: bool  # the step ends the task
    event: str  # the status event's data
    prompt_tokens: int
    completion_tokens: int
    fields: dict[str, str]
    events: list[EventDoc]
    memories: list[list[str]]  # per memory list, the messages it gains
    values: dict[str, str]  # changed session values: path to JSON
    jobs: list[JobDoc]
    held: dict[str, str]  # calls held for approval: call id to their state
    approval_timeout_s: NotRequired[float]


class SaveCompactionDoc(TypedDict):
    upto: int
    summary: str


# -- tool calls and claims -------------------------------------------------------------------


class InterpreterUseDoc(TypedDict):
    """A call's use of its session's interpreter, stamped with its result: when it ended,
    and how long the session's sandbox record is kept from then."""

    at: str
    record_ttl_s: int


class CellsDoc(TypedDict):
    """Interpreter cells a call ran, recorded with its result: the session keeps its last
    `keep`, for `ttl_s` after the last one (services/tool_worker/cells.py)."""

    codes: list[str]
    keep: int
    ttl_s: int


class PutToolResultDoc(DatabasesDoc):
    step: str
    call_id: str
    message: str  # '' only to look whether the step is complete
    ttl_s: int
    next_step: list[JobDoc]  # pushed by the caller that completes the step
    used: NotRequired[InterpreterUseDoc]  # for a call run in the session's interpreter
    cells: NotRequired[CellsDoc]  # the cells that call ran


class ClaimCallDoc(TypedDict):
    call_id: str
    worker: str  # the tool worker's node name
    incarnation: str  # this run of it
    ttl_ms: int


class ClaimRunDoc(TypedDict):
    """A call's claim, after its session's (for a call that uses the interpreter)."""

    call: ClaimCallDoc
    session: NotRequired[ClaimSessionDoc]


# -- approvals -------------------------------------------------------------------------------


class DecideApprovalDoc(DatabasesDoc):
    step: str
    call_id: str
    state: str  # the decided state's JSON
    event: str  # the approval_decided event's data
    tool_job: list[JobDoc]  # approved: the call's job; denied: none
    denial: str  # denied: the call's result
    ttl_s: int
    next_step: list[JobDoc]
    waiting_event: str  # the waiting_tools status event's data


# -- sessions --------------------------------------------------------------------------------


class ForkSessionDoc(DatabasesDoc):
    source_memory: str  # the source's top memory list: its other lists' names start with it
    new_memory: str  # the new session's
    new_id: str
    source_id: str
    source_key: str  # the source's session key, whose interpreter's holder gets `job`
    job: str  # kombu's message of the fork job (`SessionForkJob`)


# -- tool workers' sandboxes -----------------------------------------------------------------


class ClaimSessionDoc(TypedDict):
    node: str
    incarnation: str
    queue: str
    record_ttl_s: int
    place: str
    keep_alive: bool  # whether 'mine' keeps the record `record_ttl_s` longer


class HeirDoc(TypedDict):
    """Where a handed-over interpreter goes (node '': nobody was chosen)."""

    handle: str
    node: str
    incarnation: str
    queue: str


class HandOverDoc(TypedDict):
    node: str
    incarnation: str
    reason: str
    to: list[HeirDoc]  # per key


class EndSessionsDoc(TypedDict):
    node: str
    incarnation: str
    reasons: list[str]  # per key; '' when no state was lost


class RedriveQueueDoc(DatabasesDoc):
    limit: int
    fallback: str


# -- schedules -------------------------------------------------------------------------------


class CreateScheduleDoc(TypedDict):
    schedule_id: str
    created_at: str
    next_run_at: str
    max_per_tenant: int
    fields: dict[str, str]


class AdvanceScheduleDoc(TypedDict):
    schedule_id: str
    read_next_run_at: str  # the next run the tick read
    next_run_at: str
    last_run_at: str  # '' if it did not run
    runs: int
    missed: int
    run: str  # the run's JSON
    kept: int
