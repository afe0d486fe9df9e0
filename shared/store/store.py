"""The Redis store: tasks, their event streams, session memory, tool results, session locks.

Async (redis-py's asyncio client), used by the gateway and the agent worker on their event
loops; sync callers (the tool worker) run it through `shared.loop.LoopThread`. Every change a
step depends on is one Lua script (`shared.store.lua`), so it is atomic and costs one round
trip: a redelivered job finds its step already committed and stops.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import NoScriptError

from shared import keys
from shared.errors import TaskyardError
from shared.events import Event, EventKind, decode_entry, dumps
from shared.jobs import Envelope
from shared.redis_clients import SentinelSpec, async_client
from shared.schema import AgentMessage, ToolCall
from shared.settings import Settings, broker_database
from shared.spec import BusyPolicy
from shared.store import replies
from shared.store.scripts import SCRIPTS, source
from shared.task import RETENTION_S, TERMINAL, TaskRecord, TaskStatus
from shared.text import replace_lone_surrogates

__all__ = [
    "CallClaim",
    "Created",
    "MemoryTail",
    "NotReplicated",
    "StepCommit",
    "StepStart",
    "TaskStore",
    "ToolResultStored",
]

_IDEMPOTENCY_TTL_S = 24 * 3600


class NotReplicated(TaskyardError):
    """Fewer replicas than asked confirmed a write in time: it is on the primary, and a
    failover now could lose it."""

    def __init__(self, wanted: int, confirmed: int, timeout_ms: int) -> None:
        super().__init__(f"{confirmed} of {wanted} replicas confirmed the write in {timeout_ms} ms")
        self.wanted = wanted
        self.confirmed = confirmed
        self.timeout_ms = timeout_ms


@dataclass(frozen=True, slots=True)
class CallClaim:
    """A tool worker's claim on the call whose result it stores: freed with the write, which
    also stamps the last use on the session's sandbox record (`session_key`, when the call
    used an interpreter) and keeps that record `record_ttl_s` longer."""

    worker: str
    session_key: str | None = None
    record_ttl_s: float = 0


@dataclass(frozen=True, slots=True)
class Created:
    """What `create` did: made the task (and whether it holds its session now, and the task
    it cancelled to take it), found the task an idempotency key made before, or refused a
    busy session."""

    outcome: str  # "created", "existing", "busy" or "parent_ended"
    task_id: str = ""  # made, found, or (busy) the one running the session
    holds_session: bool = False
    fingerprint: str = ""
    displaced: str | None = None  # the session's task it interrupted or rolled back


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
    tokens: Mapping[str, Any] | None = None  # the model's last unpublished text, a token event
    values: Mapping[str, str] = field(default_factory=dict)  # session values changed: path, JSON


@dataclass(frozen=True, slots=True)
class ToolResultStored:
    """`complete`: every call of the step has its result; `advance`: this caller alone must
    start the next step."""

    complete: bool
    advance: bool
    live: bool = True


class TaskStore:
    """Typed access to taskyard's Redis keys. Takes a client, so tests hand in their own.

    `broker_db` is the database of Celery's broker on the same server: the scripts push the
    jobs a write starts there, in the same atomic step (see `shared.jobs`).
    """

    def __init__(self, client: aioredis.Redis, broker_db: int = 1) -> None:
        self.r = client
        self.db = int(client.connection_pool.connection_kwargs.get("db", 0))
        self.broker_db = broker_db
        self._scripts = {name: client.register_script(source(name)) for name in SCRIPTS}

    @classmethod
    def from_url(
        cls,
        url: str,
        broker_url: str,
        max_connections: int = 64,
        client_name: str | None = None,
        outage_retries: int = 20,
        sentinel: SentinelSpec | None = None,
    ) -> TaskStore:
        """A store on a bounded pool: a thousand steps in flight share a few connections
        instead of opening one each. `client_name` names them in Redis's CLIENT LIST. A lost
        connection is retried `outage_retries` times (20: about a minute, what a Redis restart
        takes; a gateway answering people waits less), on the master `sentinel` names now
        when there is one (a failover takes seconds)."""
        client = async_client(
            url, sentinel, max_connections=max_connections, pool_timeout=30,
            decode_responses=True, client_name=client_name, retry=outage_retry(outage_retries),
        )  # fmt: skip
        return cls(client, broker_database(url, broker_url, sentinel=sentinel is not None))

    @classmethod
    def from_settings(
        cls, settings: Settings, client_name: str, outage_retries: int = 20
    ) -> TaskStore:
        """The store the settings name (their URLs, or Sentinel's master), as `from_url`."""
        return cls.from_url(
            settings.redis_url, settings.broker_url, settings.redis_max_connections,
            client_name, outage_retries, settings.sentinel,
        )  # fmt: skip

    async def close(self) -> None:
        await self.r.aclose()

    async def _run(self, name: str, keys_: Sequence[str], args: Sequence[Any]) -> Any:
        return await self._scripts[name](keys=list(keys_), args=list(args))

    async def _replicated(
        self, name: str, keys_: Sequence[str], args: Sequence[Any], replicas: int, timeout_ms: int
    ) -> Any:
        """Run a script, then WAIT on the same connection (WAIT counts the replicas holding
        that connection's writes) until `replicas` replicas hold what it wrote: one round
        trip. The script must write whenever its answer needs replicating (see create_task)."""
        if not replicas:
            return await self._run(name, keys_, args)
        script = self._scripts[name]
        try:
            reply, confirmed = await self._then_wait(script.sha, keys_, args, replicas, timeout_ms)
        except NoScriptError:  # a new master (after a failover) has an empty script cache
            await self.r.script_load(script.script)
            reply, confirmed = await self._then_wait(script.sha, keys_, args, replicas, timeout_ms)
        if confirmed < replicas and reply[0] in ("created", "existing"):
            raise NotReplicated(replicas, confirmed, timeout_ms)
        return reply

    async def _then_wait(
        self, sha: str, keys_: Sequence[str], args: Sequence[Any], replicas: int, timeout_ms: int
    ) -> list[Any]:
        async with self.r.pipeline(transaction=False) as pipe:
            pipe.evalsha(sha, len(keys_), *keys_, *args)
            pipe.wait(replicas, timeout_ms)
            found: list[Any] = await pipe.execute()
        return found

    # -- tasks -------------------------------------------------------------------------------

    async def create(
        self,
        record: TaskRecord,
        first_step: Envelope | None = None,
        idempotency_key: str | None = None,
        fingerprint: str = "",
        busy: BusyPolicy = "enqueue",
        deadline_s: float = 24 * 3600,
        extra: Mapping[str, str] | None = None,
        replicas: int = 0,
        replicas_timeout_ms: int = 500,
    ) -> Created:
        """Store a new task and claim its session, pushing `first_step` then (or, while
        another task runs the session, do as `busy` says: see `create_task.lua`; a queued
        task keeps `first_step`, pushed by the write that passes the session on), in one
        atomic step. With `replicas`, a task made or found is answered only once that many
        replicas hold it (`NotReplicated` if they do not within `replicas_timeout_ms`)."""
        idem = keys.idempotency(record.tenant, idempotency_key) if idempotency_key else ""
        tenant, session_id = record.tenant, record.session_id
        keys_ = [*_task_keys(record.id), *_session_keys(record), idem or keys.task(record.id),
                 keys.tenant_tasks(tenant), keys.session_tasks(tenant, session_id),
                 keys.tenant_sessions(tenant), keys.session_paths(tenant, session_id),
                 keys.session_values(tenant, session_id),
                 keys.session_compaction(tenant, session_id),
                 keys.session_epoch(tenant, session_id)]  # fmt: skip
        mark = (fingerprint or "-") if idem else ""  # '' tells the script there is no key
        queued = dumps({"status": "queued"})
        job = [first_step.queue, first_step.message] if first_step else ["", ""]
        asked = dumps(record.user_message().model_dump(mode="json"))
        fields_ = {**record.to_redis(), **(extra or {})}
        args = [record.id, queued, mark, _IDEMPOTENCY_TTL_S, busy, self.db, self.broker_db,
                *job, asked, deadline_s, record.parent_id or "", *_flat(fields_)]  # fmt: skip
        reply = await self._replicated("create_task", keys_, args, replicas, replicas_timeout_ms)
        if reply[0] == "existing":
            return Created("existing", reply[1], fingerprint=reply[2])
        if reply[0] == "busy":
            return Created("busy", reply[1])  # the task running the session
        if reply[0] == "parent_ended":
            return Created(reply[0])
        return Created("created", record.id, reply[1] == "1", displaced=reply[2] or None)

    async def get(self, task_id: str) -> TaskRecord | None:
        fields_ = replies.fields(await self.r.hgetall(keys.task(task_id)))
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
        data = dumps({"status": status.value, **fields_})
        reason = replace_lone_surrogates(str(fields_.get("error") or "no reason given"))
        why = f"the agent's task ended {status.value}: {reason}"
        reply = await self._run(
            "end_task",
            [*_task_keys(record.id), *_session_keys(record)],
            [record.id, status.value, data, self.db, self.broker_db, why,
             *_flat(_stamp(fields_))],
        )  # fmt: skip
        return reply[0] == "ended", (reply[1] or None) if reply[0] == "ended" else None

    # -- steps -------------------------------------------------------------------------------

    async def begin_step(
        self, task_id: str, step: int, tenant: str, session_id: str,
        offsets: Mapping[str, int], epoch: str = "0",
    ) -> StepStart | None:  # fmt: skip
        """Mark step `step` running and read what it needs (see `StepStart`); None if the task
        does not exist. `offsets` gives, per memory path, how many messages the caller holds."""
        paths = list(offsets)
        memories = [keys.session_memory(tenant, session_id, p) for p in paths]
        keys_ = [*_task_keys(task_id), keys.task_tool_results(task_id, step - 1),
                 keys.session_epoch(tenant, session_id),
                 keys.session_compaction(tenant, session_id),
                 keys.session_values(tenant, session_id), keys.session_paths(tenant, session_id),
                 keys.task_session_before(task_id), *memories]  # fmt: skip
        running = dumps({"status": "running"})
        args = [str(step), running, _now(), epoch, self.db, self.broker_db,
                *(offsets[p] for p in paths)]  # fmt: skip
        reply = await self._run("begin_step", keys_, args)
        if not reply[0]:
            return None
        record = TaskRecord.from_redis(_pairs(reply[0]))
        if len(reply) == 1:
            return StepStart(record)
        began = reply[1] == "1"
        if began:
            record.status = TaskStatus.RUNNING
        results = {k: AgentMessage.model_validate_json(v) for k, v in _pairs(reply[2]).items()}
        tails = {
            path: MemoryTail(int(offset), [AgentMessage.model_validate_json(m) for m in raw])
            for path, (offset, raw) in zip(paths, reply[4], strict=True)
        }
        compaction = _compaction(_pairs(reply[5])) if reply[5] else None
        return StepStart(
            record, True, began, results, reply[3], tails, compaction, _pairs(reply[6])
        )

    async def commit_step(self, commit: StepCommit) -> tuple[bool, str | None]:
        """Apply one step exactly once, pushing every job that follows from it: its tool
        jobs and, when it ends the task, the first step of the session's next task. Returns
        (False, None) if the step was applied already or the task ended meanwhile; else
        (True, the next task of the session if this step ended the task and one waited)."""
        record, paths = commit.record, list(commit.memories)
        fields_ = _flat(_stamp(commit.fields))
        events: list[str] = []
        if commit.tokens:
            events += [EventKind.TOKEN.value, dumps(commit.tokens)]
        for message in commit.published:
            events += [EventKind.MESSAGE.value, dumps(message.model_dump(mode="json"))]
        for kind, data in commit.events:
            events += [kind.value, dumps(dict(data))]
        args: list[Any] = [
            str(record.step), record.id, commit.status.value,
            "1" if commit.status in TERMINAL else "0",
            dumps({"status": commit.status.value, **commit.shown}),
            commit.usage.get("prompt_tokens", 0), commit.usage.get("completion_tokens", 0),
            self.db, self.broker_db, len(fields_), *fields_, len(events), *events,
        ]  # fmt: skip
        for path in paths:
            messages = commit.memories[path]
            args += [len(messages), *(m.model_dump_json() for m in messages)]
        values = _flat(commit.values)
        args += [len(values), *values]
        jobs = [part for job in commit.jobs for part in job.parts()]
        args += [len(jobs), *jobs]
        held = [part for call in commit.held for part in (call.id, _pending(call))]
        timeout = commit.approval_timeout_s
        args += [len(held), *held, "" if timeout is None else timeout]
        memories = [keys.session_memory(record.tenant, record.session_id, p) for p in paths]
        names = keys.session_paths(record.tenant, record.session_id)
        approvals = keys.task_approvals(record.id, record.step)
        held_values = keys.session_values(record.tenant, record.session_id)
        keys_ = [*_task_keys(record.id), *_session_keys(record), names, approvals, held_values,
                 *memories]  # fmt: skip
        reply = await self._run("commit_step", keys_, args)
        return reply[0] == "committed", reply[1] or None

    # -- events ------------------------------------------------------------------------------

    async def push(self, jobs: Sequence[Envelope]) -> None:
        """Push jobs onto the broker from outside any other write, as the commits push theirs
        (a job bound to a session to the queue of the tool worker holding it): one round trip."""
        if jobs:
            parts = [part for job in jobs for part in job.parts()]
            await self._run("push_jobs", [], [self.db, self.broker_db, *parts])

    async def publish(self, task_id: str, kind: EventKind, data: dict[str, Any]) -> str | None:
        """Add an event while the task is live; None (nothing added) once it has ended."""
        entry_id: str | None = await self._run(
            "publish_live", _task_keys(task_id), [kind.value, dumps(data)]
        )
        return entry_id

    async def events(self, task_id: str, after: str = "-") -> list[Event]:
        """Every event after the given entry id ("-" for all)."""
        start = "-" if after == "-" else f"({after}"
        entries = replies.stream_entries(await self.r.xrange(keys.task_events(task_id), start))
        return [decode_entry(i, f) for i, f in entries]

    async def messages(self, task_id: str) -> list[AgentMessage]:
        """The task's transcript: every message event, in order."""
        return [
            AgentMessage.model_validate(e.data)
            for e in await self.events(task_id)
            if e.kind == EventKind.MESSAGE
        ]

    # -- sessions ----------------------------------------------------------------------------

    async def memory(
        self, tenant: str, session_id: str, path: str = "memory"
    ) -> list[AgentMessage]:
        raw = await self.r.lrange(keys.session_memory(tenant, session_id, path), 0, -1)
        return [AgentMessage.model_validate_json(m) for m in raw]

    async def compaction(self, tenant: str, session_id: str) -> tuple[int, AgentMessage] | None:
        """The session's latest compaction: how many of its first messages a summary
        replaces for the model, and that summary."""
        saved = replies.fields(await self.r.hgetall(keys.session_compaction(tenant, session_id)))
        return _compaction(saved) if saved else None

    async def save_compaction(self, record: TaskRecord, upto: int, summary: AgentMessage) -> bool:
        """Save the compaction a step of `record` made, unless the task ended meanwhile."""
        keys_ = [keys.task(record.id), keys.session_compaction(record.tenant, record.session_id)]
        return bool(await self._run("save_compaction", keys_, [upto, summary.model_dump_json()]))

    async def session_holder(self, tenant: str, session_id: str) -> str | None:
        """The id of the task holding the session, if any."""
        return replies.text(await self.r.get(keys.session_lock(tenant, session_id)))

    async def release_session(self, record: TaskRecord) -> str | None:
        """Pass the session on from `record` (which holds it), pushing the next task's first
        step in the same write; that task's id, if any."""
        following = await self._run(
            "release_session", _session_keys(record), [record.id, self.db, self.broker_db]
        )
        return following or None

    async def heal_session(self, tenant: str, session_id: str) -> str | None:
        """A session whose lock nobody live holds passes to its next waiting task (returned),
        its first step pushed in the same write."""
        keys_ = [keys.session_lock(tenant, session_id), keys.session_waiting(tenant, session_id)]
        return await self._run("heal_session", keys_, [self.db, self.broker_db]) or None

    # -- the sweep's view --------------------------------------------------------------------

    async def stalled(self, before: float, limit: int = 500) -> list[str]:
        """Live tasks that have not moved since `before` (a Unix time), oldest first."""
        found = await self.r.zrangebyscore(keys.LIVE_TASKS, "-inf", before, start=0, num=limit)
        return replies.members(found)

    async def overdue(self, now: float, limit: int = 500) -> list[str]:
        """Live tasks whose deadline has passed."""
        found = await self.r.zrangebyscore(keys.TASK_DEADLINES, "-inf", now, start=0, num=limit)
        return replies.members(found)

    async def undecided(self, now: float, limit: int = 500) -> list[tuple[str, int, str]]:
        """Calls held for approval past their timeout: (task id, step, call id)."""
        members = await self.r.zrangebyscore(
            keys.APPROVAL_DEADLINES, "-inf", now, start=0, num=limit
        )
        held = [m.split("|") for m in replies.members(members)]
        return [(task_id, int(step), call_id) for task_id, step, call_id in held]

    async def undecided_gone(self, task_id: str, step: int, call_id: str) -> None:
        await self.r.zrem(keys.APPROVAL_DEADLINES, f"{task_id}|{step}|{call_id}")

    async def touch(self, task_id: str) -> None:
        """Count the task as moved now (after the sweep re-drove it)."""
        await self.r.zadd(keys.LIVE_TASKS, {task_id: time.time()}, xx=True)

    async def forget(self, task_id: str) -> None:
        """Drop an ended (or vanished) task from the sweep's view."""
        await self.r.zrem(keys.LIVE_TASKS, task_id)
        await self.r.zrem(keys.TASK_DEADLINES, task_id)

    async def try_lock(self, name: str, ttl_s: float) -> bool:
        return bool(await self.r.set(name, "1", nx=True, px=int(ttl_s * 1000)))

    # -- tool results ------------------------------------------------------------------------

    async def put_tool_result(
        self,
        task_id: str,
        step: int,
        call_id: str,
        message: AgentMessage | None,
        next_step: Envelope | None = None,
        claim: CallClaim | None = None,
    ) -> ToolResultStored:
        """Store one call's result (first write wins) and publish it, while the task lives;
        with no message, only look whether the step's results are complete. The caller whose
        result completes the step pushes `next_step`, in the same atomic step; a worker that
        claimed the call frees its `claim` there too (and marks its interpreter alive)."""
        raw = message.model_dump_json() if message is not None else ""
        job = [next_step.queue, next_step.message] if next_step else ["", ""]
        keys_ = [keys.task_tool_results(task_id, step), *_task_keys(task_id),
                 keys.task_advanced(task_id, step)]  # fmt: skip
        args = [str(step), call_id, raw, RETENTION_S, self.db, self.broker_db, *job]
        if claim is not None:
            used = f"{time.time():.3f}" if claim.session_key else ""
            keys_ += [keys.tool_call_claim(task_id, step, call_id),
                      keys.tool_worker_claims(claim.worker),
                      keys.session_sandbox(claim.session_key or "-")]  # fmt: skip
            args += [claim.worker, used, max(1, int(claim.record_ttl_s))]
        reply = await self._run("put_tool_result", keys_, args)
        if reply[0] == "ended":
            return ToolResultStored(False, False, live=False)
        return ToolResultStored(reply[0] == "complete", reply[1] == "1")

    async def approvals(self, task_id: str, step: int) -> dict[str, dict[str, Any]]:
        """The step's calls held for approval: call id to its state (`state`, `call`,
        `reason`)."""
        raw = replies.fields(await self.r.hgetall(keys.task_approvals(task_id, step)))
        return {call_id: orjson.loads(state) for call_id, state in raw.items()}

    async def was_held(self, task_id: str, before_step: int, call_id: str) -> bool:
        """Whether a step of the task before `before_step` held `call_id` for approval."""
        async with self.r.pipeline(transaction=False) as pipe:
            for step in range(max(0, before_step)):
                pipe.hexists(keys.task_approvals(task_id, step), call_id)
            return any(await pipe.execute())

    async def decide_approval(
        self,
        record: TaskRecord,
        call: ToolCall,
        decided: Mapping[str, Any],
        tool_job: Envelope | None,
        denial: AgentMessage | None,
        next_step: Envelope,
    ) -> tuple[str, str]:
        """Apply a decision on a held call of the task's current step (see
        `decide_approval.lua`): ('approved' | 'denied' | 'unknown' | 'decided', state)."""
        step = record.step - 1
        keys_ = [*_task_keys(record.id), keys.task_approvals(record.id, step),
                 keys.task_tool_results(record.id, step),
                 keys.task_advanced(record.id, step)]  # fmt: skip
        event = {"call_id": call.id, **{k: v for k, v in decided.items() if k != "call"}}
        job = [tool_job.queue, tool_job.message] if tool_job else ["", ""]
        args = [str(step), call.id, "approve" if tool_job else "deny", dumps(dict(decided)),
                dumps(event), self.db, self.broker_db, *job,
                denial.model_dump_json() if denial else "", RETENTION_S,
                next_step.queue, next_step.message, dumps({"status": "waiting_tools"}),
                tool_job.sticky if tool_job else ""]  # fmt: skip
        outcome, state = await self._run("decide_approval", keys_, args)
        return outcome, state

    async def children(self, task_id: str) -> list[str]:
        """The ids of the child tasks the task's agent tool calls started."""
        return sorted(replies.set_members(await self.r.smembers(keys.task_children(task_id))))

    async def claim_call(
        self, task_id: str, step: int, call_id: str, worker: str, ttl_s: float
    ) -> Literal["claimed", "done", "busy"]:
        """Claim a tool call for `worker` (its label) to run, in one round trip: `done` if its
        result is in, `busy` while another holds it (a claim lapses after `ttl_s`, when that
        worker starts again, or as its result is stored)."""
        claim = keys.tool_call_claim(task_id, step, call_id)
        keys_ = [keys.task_tool_results(task_id, step), claim, keys.tool_worker_claims(worker)]
        claimed: Literal["claimed", "done", "busy"] = await self._run(
            "claim_call", keys_, [call_id, worker, int(ttl_s * 1000)]
        )
        return claimed

    async def release_call(self, task_id: str, step: int, call_id: str, worker: str) -> None:
        """Free a claim without storing a result (the call failed; a retry may run it)."""
        claim = keys.tool_call_claim(task_id, step, call_id)
        async with self.r.pipeline(transaction=True) as pipe:
            pipe.delete(claim)
            pipe.srem(keys.tool_worker_claims(worker), claim)
            await pipe.execute()

    async def release_worker_claims(self, worker: str) -> int:
        """Free every claim a worker of this label held (it is starting again): their calls
        can run at once. How many it freed."""
        return int(await self._run("release_claims", [keys.tool_worker_claims(worker)], [worker]))

    async def tool_results(
        self, task_id: str, step: int, calls: Sequence[ToolCall]
    ) -> list[AgentMessage]:
        """Results in the order the model made the calls."""
        raw = await self.r.hmget(keys.task_tool_results(task_id, step), [c.id for c in calls])
        return [AgentMessage.model_validate_json(m) for m in raw if m is not None]


def outage_retry(retries: int) -> Retry:
    """Ride out a Redis restart: retry a command on a lost connection with jittered
    exponential backoff (at most 5 s apart). Every script is safe to run twice."""
    return Retry(ExponentialWithJitterBackoff(base=0.05, cap=5.0), retries=retries)


def _pending(call: ToolCall) -> str:
    return dumps({"state": "pending", "call": call.model_dump(mode="json")})


def _compaction(saved: Mapping[str, str]) -> tuple[int, AgentMessage]:
    return int(saved["upto"]), AgentMessage.model_validate_json(saved["summary"])


def _task_keys(task_id: str) -> list[str]:
    return [keys.task(task_id), keys.task_events(task_id)]


def _session_keys(record: TaskRecord) -> list[str]:
    return [
        keys.session_lock(record.tenant, record.session_id),
        keys.session_waiting(record.tenant, record.session_id),
    ]


def _pairs(flat: Sequence[str]) -> dict[str, str]:
    return dict(zip(flat[::2], flat[1::2], strict=True))


def _flat(mapping: Mapping[str, str]) -> list[str]:
    return [item for pair in mapping.items() for item in pair]


def _now() -> str:
    return dumps(time.time())


def _stamp(fields_: Mapping[str, Any]) -> dict[str, str]:
    # Text fields (a result, a failure's reason) go to Redis as UTF-8: no lone surrogates.
    out = {
        k: replace_lone_surrogates(v) if isinstance(v, str) else dumps(v)
        for k, v in fields_.items()
    }
    out["updated_at"] = _now()
    return out
