"""Tasks in the store: made (taking or queueing behind their session), read, ended, their
event streams, the session's hand-over, and jobs pushed outside any other write. Scripts:
`lua/tasks/`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from taskyard.agentkit.schema import AgentMessage
from taskyard.agentkit.spec import BusyPolicy
from taskyard.agentkit.text import replace_lone_surrogates
from taskyard.plumbing import keys
from taskyard.plumbing.settings import SweepSettings
from taskyard.runtime.events import Event, EventKind, decode_entry, dumps
from taskyard.runtime.jobs import Envelope
from taskyard.runtime.store import redis_replies
from taskyard.runtime.store.base import NotReplicated, ScriptedStore, stamp
from taskyard.runtime.store.documents import (
    CreateTaskDoc,
    DatabasesDoc,
    EndTaskDoc,
    PublishDoc,
    PushJobsDoc,
    ReleaseSessionDoc,
    jobs,
)
from taskyard.runtime.store.script_keys import CreateTaskKeys, EndTaskKeys, SessionKeys, TaskKeys
from taskyard.runtime.store.script_replies import (
    CREATE_TASK,
    END_TASK,
    CreateOutcome,
    CreateTaskReply,
    SessionBusy,
    TaskCreated,
    TaskExisting,
    decode,
)
from taskyard.runtime.task import TERMINAL, TaskRecord, TaskStatus

__all__ = ["Created", "Tasks"]

_IDEMPOTENCY_TTL_S = 24 * 3600

# What a task stored by no way in (a test, a script) stands still for before the sweep
# re-drives it: the setting's default.
_DEFAULT_STALL_S: float = SweepSettings.model_fields["stall_s"].default


@dataclass(frozen=True, slots=True)
class Created:
    """What `create` did: made the task (and whether it holds its session now, and the task
    it cancelled to take it), found the task an idempotency key made before, or refused a
    busy session."""

    outcome: CreateOutcome
    task_id: str = ""  # made, found, or (busy) the one running the session
    holds_session: bool = False
    fingerprint: str = ""
    displaced: str | None = None  # the session's task it interrupted or rolled back


class Tasks(ScriptedStore):
    """Tasks, their events and their sessions' hand-over."""

    def databases(self) -> DatabasesDoc:
        return DatabasesDoc(store_db=self.db, broker_db=self.broker_db)

    async def create(
        self,
        record: TaskRecord,
        first_step: Envelope | None = None,
        idempotency_key: str | None = None,
        fingerprint: str = "",
        busy: BusyPolicy = "enqueue",
        deadline_s: float | None = None,
        stall_s: float = _DEFAULT_STALL_S,
        extra: Mapping[str, str] | None = None,
        replicas: int = 0,
        replicas_timeout_ms: int = 500,
    ) -> Created:
        """Store a new task and claim its session, pushing `first_step` then (or, while
        another task runs the session, do as `busy` says: see `create_task.lua`; a queued
        task keeps `first_step`, pushed by the write that passes the session on), in one
        atomic step. The sweep looks at it at its deadline (fixed here: `deadline_s`, else
        the record's own, else a day), or once it stood still for `stall_s`. With
        `replicas`, a task made or found is answered only once that many replicas hold it
        (`NotReplicated` if they do not within `replicas_timeout_ms`)."""
        record.deadline_s = deadline_s or record.deadline_s or 24 * 3600.0
        idem = keys.idempotency(record.tenant, idempotency_key) if idempotency_key else ""
        tenant, session_id = record.tenant, record.session_id
        keys_ = CreateTaskKeys(
            task=keys.task(record.id), events=keys.task_events(record.id),
            lock=keys.session_lock(tenant, session_id),
            waiting=keys.session_waiting(tenant, session_id),
            idempotency=idem or keys.task(record.id), tenant_tasks=keys.tenant_tasks(tenant),
            session_tasks=keys.session_tasks(tenant, session_id),
            tenant_sessions=keys.tenant_sessions(tenant),
            paths=keys.session_paths(tenant, session_id),
            values=keys.session_values(tenant, session_id),
            compaction=keys.session_compaction(tenant, session_id),
            epoch=keys.session_epoch(tenant, session_id),
        )  # fmt: skip
        doc = CreateTaskDoc(
            **self.databases(), task_id=record.id, queued=dumps({"status": "queued"}),
            fingerprint=(fingerprint or "-") if idem else "",  # '': there is no key
            key_ttl_s=_IDEMPOTENCY_TTL_S, busy=busy, first_step=jobs([first_step]),
            asked=dumps(record.user_message().model_dump(mode="json")),
            parent_id=record.parent_id or "",
            fields={**record.to_redis(), **(extra or {}), "stall_s": dumps(stall_s)},
        )  # fmt: skip
        raw, confirmed = await self.replicated(
            "tasks/create_task", keys_, doc, replicas, replicas_timeout_ms
        )
        created = _created(record, decode(CREATE_TASK, raw))
        if confirmed < replicas and created.outcome in ("created", "existing"):
            raise NotReplicated(replicas, confirmed, timeout_ms=replicas_timeout_ms)
        return created

    async def get(self, task_id: str) -> TaskRecord | None:
        fields_ = redis_replies.fields(await self.r.hgetall(keys.task(task_id)))
        return TaskRecord.from_redis(fields_) if fields_ else None

    async def get_many(self, task_ids: Sequence[str]) -> list[TaskRecord | None]:
        """Several tasks in one round trip, in order (None where one is gone)."""
        async with self.r.pipeline(transaction=False) as pipe:
            for task_id in task_ids:
                pipe.hgetall(keys.task(task_id))
            found = await pipe.execute()
        return [TaskRecord.from_redis(f) if f else None for f in found]

    async def end(
        self, record: TaskRecord, status: TaskStatus, **fields_: Any
    ) -> tuple[bool, str | None]:
        """End a live task (cancelled, failed, timed out) and pass its session on (the next
        task's first step pushed in the same write), or take it out of the session's queue.
        Returns (whether it ended now, the next task's id)."""
        assert status in TERMINAL
        reason = replace_lone_surrogates(str(fields_.get("error") or "no reason given"))
        doc = EndTaskDoc(
            **self.databases(), task_id=record.id, status=status.value,
            event=dumps({"status": status.value, **fields_}),
            why=f"the agent's task ended {status.value}: {reason}", fields=stamp(fields_),
        )  # fmt: skip
        reply = decode(END_TASK, await self.script("tasks/end_task", _end_keys(record), doc))
        return reply.outcome == "ended", reply.following or None

    async def children(self, task_id: str) -> list[str]:
        """The ids of the child tasks the task's agent tool calls started."""
        return sorted(redis_replies.set_members(await self.r.smembers(keys.task_children(task_id))))

    # -- events ------------------------------------------------------------------------------

    async def push(self, envelopes: Sequence[Envelope]) -> None:
        """Push jobs onto the broker from outside any other write, as the commits push theirs
        (a job bound to a session to the queue of the tool worker holding it): one round trip."""
        if envelopes:
            doc = PushJobsDoc(**self.databases(), jobs=jobs(envelopes))
            await self.script("tasks/push_jobs", None, doc)

    async def publish(self, task_id: str, kind: EventKind, data: dict[str, Any]) -> str | None:
        """Add an event while the task is live; None (nothing added) once it has ended."""
        doc = PublishDoc(kind=kind.value, data=dumps(data))
        keys_ = TaskKeys(keys.task(task_id), keys.task_events(task_id))
        entry_id: str | None = await self.script("tasks/publish_live", keys_, doc)
        return entry_id

    async def events(self, task_id: str, after: str = "-") -> list[Event]:
        """Every event after the given entry id ("-" for all)."""
        start = "-" if after == "-" else f"({after}"
        entries = redis_replies.stream_entries(
            await self.r.xrange(keys.task_events(task_id), start)
        )
        return [decode_entry(i, f) for i, f in entries]

    async def messages(self, task_id: str) -> list[AgentMessage]:
        """The task's transcript: every message event, in order."""
        return [
            AgentMessage.model_validate(e.data)
            for e in await self.events(task_id)
            if e.kind == EventKind.MESSAGE
        ]

    # -- the session's hand-over -------------------------------------------------------------

    async def session_holder(self, tenant: str, session_id: str) -> str | None:
        """The id of the task holding the session, if any."""
        return redis_replies.text(await self.r.get(keys.session_lock(tenant, session_id)))

    async def release_session(self, record: TaskRecord) -> str | None:
        """Pass the session on from `record` (which holds it), pushing the next task's first
        step in the same write; that task's id, if any."""
        doc = ReleaseSessionDoc(**self.databases(), task_id=record.id)
        keys_ = _session_keys(record.tenant, record.session_id)
        following = await self.script("tasks/release_session", keys_, doc)
        return following or None

    async def heal_session(self, tenant: str, session_id: str) -> str | None:
        """A session whose lock nobody live holds passes to its next waiting task (returned),
        its first step pushed in the same write."""
        keys_ = _session_keys(tenant, session_id)
        return await self.script("tasks/heal_session", keys_, self.databases()) or None


def _created(record: TaskRecord, reply: CreateTaskReply) -> Created:
    if isinstance(reply, TaskCreated):
        return Created("created", record.id, reply.holds_session, displaced=reply.displaced or None)
    if isinstance(reply, TaskExisting):
        return Created("existing", reply.task_id, fingerprint=reply.fingerprint)
    if isinstance(reply, SessionBusy):
        return Created("busy", reply.task_id)  # the task running the session
    return Created("parent_ended")


def _session_keys(tenant: str, session_id: str) -> SessionKeys:
    return SessionKeys(
        keys.session_lock(tenant, session_id), keys.session_waiting(tenant, session_id)
    )


def _end_keys(record: TaskRecord) -> EndTaskKeys:
    lock, waiting = _session_keys(record.tenant, record.session_id)
    return EndTaskKeys(keys.task(record.id), keys.task_events(record.id), lock, waiting)
