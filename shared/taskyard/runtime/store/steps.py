"""Agent steps in the store: begin one (the task, its inputs and the session's new messages in
one round trip), commit it exactly once with every job that follows from it, and the
session's memory and compaction it reads and writes. Scripts: `lua/steps/`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from taskyard.agentkit.schema import AgentMessage, ToolCall
from taskyard.plumbing import keys
from taskyard.runtime.events import EventKind, dumps
from taskyard.runtime.jobs import Envelope
from taskyard.runtime.store import redis_replies
from taskyard.runtime.store.base import ScriptedStore, now, pairs, stamp
from taskyard.runtime.store.documents import (
    BeginStepDoc,
    CommitStepDoc,
    EventDoc,
    SaveCompactionDoc,
    jobs,
)
from taskyard.runtime.store.script_keys import BeginStepKeys, CommitStepKeys, SaveCompactionKeys
from taskyard.runtime.store.script_replies import BEGIN_STEP, COMMIT_STEP, StepBegun, decode
from taskyard.runtime.task import TERMINAL, TaskRecord, TaskStatus

__all__ = ["MemoryTail", "StepCommit", "StepStart", "Steps"]


@dataclass(frozen=True, slots=True)
class MemoryTail:
    """A memory's messages from `offset` on (offset 0: the whole memory)."""

    offset: int
    messages: list[AgentMessage]


@dataclass(slots=True)
class StepStart:
    """What `begin_step` read. `current` is False for a stale, duplicate or ended task's step:
    then only `record` is filled."""

    record: TaskRecord
    current: bool = False
    began: bool = False  # this call moved the task to running
    results: dict[str, AgentMessage] = field(default_factory=dict)
    epoch: str = "0"
    memories: dict[str, MemoryTail] = field(default_factory=dict)
    # Read along when a memory was read whole: how many of the session's first messages a
    # summary replaces for the model, and that summary (None: never compacted).
    compaction: tuple[int, AgentMessage] | None = None
    values: dict[str, str] = field(default_factory=dict)  # session values: path to JSON

    def inputs(self) -> list[AgentMessage]:
        """The step's input: the user's message first, then the tool results in call order."""
        record = self.record
        if record.step == 0:
            return [record.user_message()]
        return [self.results[c.id] for c in record.pending_calls if c.id in self.results]


@dataclass(frozen=True, slots=True)
class StepCommit:
    """One step's writes: new messages per memory, changed session values, events, the
    task's new state."""

    record: TaskRecord
    status: TaskStatus
    memories: Mapping[str, Sequence[AgentMessage]] = field(default_factory=dict)
    published: Sequence[AgentMessage] = ()
    usage: Mapping[str, int] = field(default_factory=dict)
    fields: Mapping[str, Any] = field(default_factory=dict)
    shown: Mapping[str, Any] = field(default_factory=dict)  # extra data of the status event
    jobs: Sequence[Envelope] = ()  # pushed to the broker with the commit
    held: Sequence[ToolCall] = ()  # calls that wait for a person's approval
    events: Sequence[tuple[EventKind, Mapping[str, Any]]] = ()  # after the messages
    approval_timeout_s: float | None = None
    unsent_text: Mapping[str, Any] | None = None  # last unpublished delta: a token event
    values: Mapping[str, str] = field(default_factory=dict)  # session values changed: path, JSON

    def document(self, store_db: int, broker_db: int) -> CommitStepDoc:
        """The commit as `commit_step.lua` reads it (memories in the order of `memories`)."""
        doc = CommitStepDoc(
            store_db=store_db, broker_db=broker_db,
            step=str(self.record.step), status=self.status.value,
            ends=self.status in TERMINAL,
            event=dumps({"status": self.status.value, **self.shown}),
            prompt_tokens=self.usage.get("prompt_tokens", 0),
            completion_tokens=self.usage.get("completion_tokens", 0),
            fields=stamp(self.fields), events=self._events(),
            memories=[[m.model_dump_json() for m in ms] for ms in self.memories.values()],
            values=dict(self.values), jobs=jobs(self.jobs),
            held={call.id: _pending(call) for call in self.held},
        )  # fmt: skip
        if self.approval_timeout_s is not None:
            doc["approval_timeout_s"] = self.approval_timeout_s
        return doc

    def _events(self) -> list[EventDoc]:
        """The token event first, then the published messages, then the other events."""
        token = EventDoc(kind=EventKind.TOKEN.value, data=dumps(self.unsent_text))
        events = [token] if self.unsent_text else []
        events += [EventDoc(kind=EventKind.MESSAGE.value, data=dumps(m.model_dump(mode="json")))
                   for m in self.published]  # fmt: skip
        return events + [EventDoc(kind=k.value, data=dumps(dict(d))) for k, d in self.events]


class Steps(ScriptedStore):
    """Steps and the session state they read and write."""

    async def begin_step(
        self, task_id: str, step: int, tenant: str, session_id: str,
        offsets: Mapping[str, int], epoch: str = "0",
    ) -> StepStart | None:  # fmt: skip
        """Mark step `step` running and read what it needs (see `StepStart`); None if the task
        does not exist. `offsets` gives, per memory path, how many messages the caller holds."""
        paths = list(offsets)
        keys_ = BeginStepKeys(
            task=keys.task(task_id), events=keys.task_events(task_id),
            results=keys.task_tool_results(task_id, step - 1),
            epoch=keys.session_epoch(tenant, session_id),
            compaction=keys.session_compaction(tenant, session_id),
            values=keys.session_values(tenant, session_id),
            paths=keys.session_paths(tenant, session_id),
            memories=tuple(keys.session_memory(tenant, session_id, p) for p in paths),
        )  # fmt: skip
        doc = BeginStepDoc(
            store_db=self.db, broker_db=self.broker_db, step=str(step),
            running=dumps({"status": "running"}), updated_at=now(), epoch=epoch,
            offsets=[offsets[p] for p in paths],
        )  # fmt: skip
        reply = decode(BEGIN_STEP, await self.script("steps/begin_step", keys_, doc))
        if reply.outcome == "missing":
            return None
        record = TaskRecord.from_redis(pairs(reply.task))
        if not isinstance(reply, StepBegun):  # stale: a step not current, or the task ended
            return StepStart(record)
        return _started(record, reply, paths)

    async def commit_step(self, commit: StepCommit) -> tuple[bool, str | None]:
        """Apply one step exactly once, pushing every job that follows from it: its tool
        jobs and, when it ends the task, the first step of the session's next task. Returns
        (False, None) if the step was applied already or the task ended meanwhile; else
        (True, the next task of the session if this step ended the task and one waited)."""
        record = commit.record
        tenant, session_id = record.tenant, record.session_id
        keys_ = CommitStepKeys(
            task=keys.task(record.id), events=keys.task_events(record.id),
            lock=keys.session_lock(tenant, session_id),
            waiting=keys.session_waiting(tenant, session_id),
            paths=keys.session_paths(tenant, session_id),
            approvals=keys.task_approvals(record.id, record.step),
            values=keys.session_values(tenant, session_id),
            memories=tuple(keys.session_memory(tenant, session_id, p) for p in commit.memories),
        )  # fmt: skip
        doc = commit.document(self.db, self.broker_db)
        reply = decode(COMMIT_STEP, await self.script("steps/commit_step", keys_, doc))
        return reply.outcome == "committed", reply.following or None

    async def memory(
        self, tenant: str, session_id: str, path: str = "memory"
    ) -> list[AgentMessage]:
        raw = await self.r.lrange(keys.session_memory(tenant, session_id, path), 0, -1)
        return [AgentMessage.model_validate_json(m) for m in raw]

    async def compaction(self, tenant: str, session_id: str) -> tuple[int, AgentMessage] | None:
        """The session's latest compaction: how many of its first messages a summary
        replaces for the model, and that summary."""
        saved = redis_replies.fields(
            await self.r.hgetall(keys.session_compaction(tenant, session_id))
        )
        return _compaction(saved) if saved else None

    async def save_compaction(self, record: TaskRecord, upto: int, summary: AgentMessage) -> bool:
        """Save the compaction a step of `record` made, unless the task ended meanwhile."""
        keys_ = SaveCompactionKeys(
            keys.task(record.id), keys.session_compaction(record.tenant, record.session_id)
        )
        doc = SaveCompactionDoc(upto=upto, summary=summary.model_dump_json())
        return bool(await self.script("steps/save_compaction", keys_, doc))


def _started(record: TaskRecord, reply: StepBegun, paths: Sequence[str]) -> StepStart:
    if reply.began:
        record.status = TaskStatus.RUNNING
    results = {k: AgentMessage.model_validate_json(v) for k, v in pairs(reply.results).items()}
    tails = {
        path: MemoryTail(offset, [AgentMessage.model_validate_json(m) for m in raw])
        for path, (offset, raw) in zip(paths, reply.memories, strict=True)
    }
    compaction = _compaction(pairs(reply.compaction)) if reply.compaction else None
    return StepStart(record, True, reply.began, results, reply.epoch, tails, compaction,
                     pairs(reply.values))  # fmt: skip


def _pending(call: ToolCall) -> str:
    return dumps({"state": "pending", "call": call.model_dump(mode="json")})


def _compaction(saved: Mapping[str, str]) -> tuple[int, AgentMessage]:
    return int(saved["upto"]), AgentMessage.model_validate_json(saved["summary"])
