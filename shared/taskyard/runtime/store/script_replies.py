"""What the Lua scripts answer, by name, typed in one place.

A script answering several values returns them as a flat name, value list (`named` in
prelude.lua: a Lua table with names would reach the client empty), no value encoded twice;
`decode` validates it against its model here, so a name missing, unknown or of another type
fails loudly instead of being read as something else. Replies of one value (a count, an id,
a word) stay as they are.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, SkipValidation, TypeAdapter

__all__ = [
    "APPROVAL",
    "BEGIN_STEP",
    "CLAIM_RUN",
    "COMMIT_STEP",
    "CREATE_TASK",
    "END_TASK",
    "FORK_SESSION",
    "REDRIVE",
    "RESULT_STORED",
    "SESSION_CLAIM",
    "ApprovalOutcome",
    "ApprovalReply",
    "ClaimRunReply",
    "CreateOutcome",
    "CreateTaskReply",
    "ForkSessionReply",
    "ParentEnded",
    "Redriven",
    "ResultStoredReply",
    "SessionBusy",
    "SessionClaimReply",
    "StepBegun",
    "StepCommitReply",
    "StepNotBegun",
    "TaskCreated",
    "TaskEndReply",
    "TaskExisting",
    "decode",
]


R = TypeVar("R")


class _Reply(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def decode(adapter: TypeAdapter[R], reply: list[Any]) -> R:
    """A script's named reply as its model (pydantic's ValidationError if it is not one)."""
    return adapter.validate_python(dict(zip(reply[::2], reply[1::2], strict=True)))


# -- tasks -----------------------------------------------------------------------------------

CreateOutcome = Literal["created", "existing", "busy", "parent_ended"]


class TaskCreated(_Reply):
    outcome: Literal["created"]
    holds_session: bool
    displaced: str  # '' for none


class TaskExisting(_Reply):
    outcome: Literal["existing"]
    task_id: str
    fingerprint: str


class SessionBusy(_Reply):
    outcome: Literal["busy"]
    task_id: str  # the task running the session


class ParentEnded(_Reply):
    outcome: Literal["parent_ended"]


CreateTaskReply = TaskCreated | TaskExisting | SessionBusy | ParentEnded
CREATE_TASK: TypeAdapter[CreateTaskReply] = TypeAdapter(
    Annotated[CreateTaskReply, Field(discriminator="outcome")]
)


class TaskEndReply(_Reply):
    outcome: Literal["ended", "ended_already"]
    following: str  # the task the session passed to; '' for none


END_TASK = TypeAdapter(TaskEndReply)

# -- steps -----------------------------------------------------------------------------------


# A hash (HGETALL, flat) or a list of messages: its items are checked where they are read
# (`TaskRecord`, `AgentMessage`), not here too, on the step's hot path.
_Bulk = SkipValidation[list[str]]


class StepNotBegun(_Reply):
    outcome: Literal["missing", "stale"]  # no such task; a step not current, or it ended
    task: _Bulk  # the task's hash (empty when missing)


class StepBegun(_Reply):
    outcome: Literal["begun"]
    task: _Bulk
    began: bool  # this call moved the task to running
    results: _Bulk  # the previous step's tool results: a hash
    epoch: str
    memories: list[tuple[int, _Bulk]]  # per memory list: the offset read from, its messages
    compaction: _Bulk  # a hash; empty unless a memory was read whole
    values: _Bulk  # a hash


BEGIN_STEP: TypeAdapter[StepNotBegun | StepBegun] = TypeAdapter(
    Annotated[StepNotBegun | StepBegun, Field(discriminator="outcome")]
)


class StepCommitReply(_Reply):
    outcome: Literal["committed", "conflict"]
    following: str  # the task the session passed to; '' for none


COMMIT_STEP = TypeAdapter(StepCommitReply)

# -- tool calls and approvals ----------------------------------------------------------------


class ResultStoredReply(_Reply):
    outcome: Literal["ended", "stored", "advanced"]  # advanced: completed the step, pushed the next


RESULT_STORED = TypeAdapter(ResultStoredReply)


ApprovalOutcome = Literal["approved", "denied", "unknown", "decided"]


class ApprovalReply(_Reply):
    outcome: ApprovalOutcome
    state: str  # decided: the state it was decided as before; else ''


APPROVAL = TypeAdapter(ApprovalReply)

# -- sessions --------------------------------------------------------------------------------


class ForkSessionReply(_Reply):
    outcome: Literal["forked", "missing", "exists", "busy"]
    job_sent: bool  # forked: the fork job went to the live holder of the source's interpreter
    task_id: str  # busy: the task holding the source, or the first waiting for it; else ''
    task_status: str  # busy: its status; else ''


FORK_SESSION = TypeAdapter(ForkSessionReply)

# -- tool workers' sandboxes -----------------------------------------------------------------


class SessionClaimReply(_Reply):
    verdict: Literal["new", "mine", "forward", "lost", "adopt"]
    detail: str
    handle: str


SESSION_CLAIM = TypeAdapter(SessionClaimReply)


class ClaimRunReply(_Reply):
    verdict: Literal["new", "mine", "forward", "lost", "adopt", ""]  # '': no session asked
    detail: str
    handle: str
    call: Literal["claimed", "done", "busy", "ended", ""]  # '': forwarded, not claimed


CLAIM_RUN = TypeAdapter(ClaimRunReply)


class Redriven(_Reply):
    moved: int
    left: int


REDRIVE = TypeAdapter(Redriven)
