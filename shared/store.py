"""The Redis store: tasks, their event streams, session memory, tool results, session locks.

Every write that must not apply twice (a step's commit) runs as a WATCH/MULTI transaction keyed
by the step number, so a redelivered Celery job finds the step already committed and stops.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable

import redis

from shared import keys
from shared.events import Event, EventKind, decode_entry, encode
from shared.schema import AgentMessage
from shared.task import TERMINAL, TaskRecord, TaskStatus

__all__ = ["StepConflict", "TaskStore"]

_IDEMPOTENCY_TTL_S = 24 * 3600


# KEYS: session lock, waiting list. ARGV: task id. 1 if the task holds the session now.
_CLAIM_SESSION = """
local holder = redis.call('GET', KEYS[1])
if not holder then redis.call('SET', KEYS[1], ARGV[1]) return 1 end
if holder == ARGV[1] then return 1 end
redis.call('RPUSH', KEYS[2], ARGV[1])
return 0
"""

# KEYS: session lock, waiting list. ARGV: task id. The next task's id, if one was waiting.
_RELEASE_SESSION = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return false end
local following = redis.call('LPOP', KEYS[2])
if following then redis.call('SET', KEYS[1], following) return following end
redis.call('DEL', KEYS[1])
return false
"""


class StepConflict(Exception):
    """The step was already committed (a redelivered or duplicate job)."""


class TaskStore:
    """Typed access to taskyard's Redis keys. Takes a client, so tests hand in their own."""

    def __init__(self, client: redis.Redis) -> None:
        self.r = client
        # Lua, so that taking the lock and joining the queue cannot interleave with a release.
        self._claim = client.register_script(_CLAIM_SESSION)
        self._release = client.register_script(_RELEASE_SESSION)

    @classmethod
    def from_url(cls, url: str) -> TaskStore:
        return cls(redis.Redis.from_url(url, decode_responses=True))

    # -- tasks -------------------------------------------------------------------------------

    def create(self, record: TaskRecord, idempotency_key: str | None = None) -> TaskRecord:
        """Store a new task, or return the one already created under the idempotency key."""
        if idempotency_key:
            idem = f"idempotency:{record.tenant}:{idempotency_key}"
            if not self.r.set(idem, record.id, nx=True, ex=_IDEMPOTENCY_TTL_S):
                existing = self.get(self.r.get(idem) or "")
                if existing:
                    return existing
        pipe = self.r.pipeline()
        pipe.hset(keys.task(record.id), mapping=record.to_redis())
        pipe.xadd(keys.task_events(record.id), encode(EventKind.STATUS, {"status": "queued"}))
        pipe.execute()
        return record

    def get(self, task_id: str) -> TaskRecord | None:
        fields = self.r.hgetall(keys.task(task_id))
        return TaskRecord.from_redis(fields) if fields else None

    def set_status(self, task_id: str, status: TaskStatus, **data: str) -> bool:
        """Move a task that has not ended to a new state (no step commit), with its event;
        False if it had ended (a cancelled task stays cancelled)."""
        task_key = keys.task(task_id)
        with self.r.pipeline() as pipe:
            while True:
                try:
                    pipe.watch(task_key)
                    if TaskStatus(pipe.hget(task_key, "status")) in TERMINAL:
                        return False
                    pipe.multi()
                    pipe.hset(task_key, mapping={"status": status.value, **_stamp(data)})
                    event = encode(EventKind.STATUS, {"status": status.value, **data})
                    pipe.xadd(keys.task_events(task_id), event)
                    pipe.execute()
                    return True
                except redis.WatchError:
                    continue  # the task changed meanwhile: look again

    def commit_step(
        self,
        record: TaskRecord,
        messages: list[AgentMessage],
        status: TaskStatus,
        publish: Iterable[AgentMessage] = (),
        usage: dict[str, int] | None = None,
        **fields: str,
    ) -> None:
        """Apply one agent step: memory append, step + 1, new status, events, the model's
        token usage; exactly once. Raises `StepConflict` when the task's step is no longer
        `record.step`, or the task ended meanwhile (it was cancelled).
        """
        task_key = keys.task(record.id)
        with self.r.pipeline() as pipe:
            try:
                pipe.watch(task_key)
                step, status_now = pipe.hmget(task_key, ["step", "status"])
                if step != str(record.step) or TaskStatus(status_now) in TERMINAL:
                    raise StepConflict(record.id)  # applied already, or the task was cancelled
                pipe.multi()
                self._write_step(pipe, record, messages, status, publish, fields)
                for name in ("prompt_tokens", "completion_tokens"):
                    pipe.hincrby(task_key, name, (usage or {}).get(name, 0))
                pipe.execute()
            except redis.WatchError as exc:
                raise StepConflict(record.id) from exc

    def _write_step(
        self,
        pipe: redis.client.Pipeline,
        record: TaskRecord,
        messages: list[AgentMessage],
        status: TaskStatus,
        publish: Iterable[AgentMessage],
        fields: dict[str, str],
    ) -> None:
        memory = keys.session_memory(record.tenant, record.session_id)
        if messages:
            pipe.rpush(memory, *(m.model_dump_json() for m in messages))
        events = keys.task_events(record.id)
        for message in publish:
            pipe.xadd(events, encode(EventKind.MESSAGE, message.model_dump(mode="json")))
        mapping = {"step": str(record.step + 1), "status": status.value, **_stamp(fields)}
        pipe.hset(keys.task(record.id), mapping=mapping)
        shown = {k: v for k, v in fields.items() if k != "pending_calls"}
        status_data = {"status": status.value, **shown}
        pipe.xadd(events, encode(EventKind.STATUS, status_data))

    # -- events ------------------------------------------------------------------------------

    def publish(self, task_id: str, kind: EventKind, data: dict) -> str:
        return self.r.xadd(keys.task_events(task_id), encode(kind, data))

    def events(self, task_id: str, after: str = "-") -> list[Event]:
        """Every event after the given entry id ("-" for all)."""
        start = "-" if after == "-" else f"({after}"
        return [decode_entry(i, f) for i, f in self.r.xrange(keys.task_events(task_id), start)]

    def messages(self, task_id: str) -> list[AgentMessage]:
        """The task's transcript: every message event, in order."""
        return [
            AgentMessage.model_validate(e.data)
            for e in self.events(task_id)
            if e.kind == EventKind.MESSAGE
        ]

    # -- sessions ----------------------------------------------------------------------------

    def memory(self, tenant: str, session_id: str) -> list[AgentMessage]:
        raw = self.r.lrange(keys.session_memory(tenant, session_id), 0, -1)
        return [AgentMessage.model_validate_json(m) for m in raw]

    def claim_session(self, record: TaskRecord) -> bool:
        """Take the session for this task; False (and the task queued behind) if it is busy."""
        lock = keys.session_lock(record.tenant, record.session_id)
        return bool(self._claim(keys=[lock, _waiting(record)], args=[record.id]))

    def session_busy(self, record: TaskRecord) -> bool:
        holder = self.r.get(keys.session_lock(record.tenant, record.session_id))
        return holder is not None and holder != record.id

    def release_session(self, record: TaskRecord) -> str | None:
        """Free the session; hand it to the next waiting task, whose id is returned."""
        lock = keys.session_lock(record.tenant, record.session_id)
        return self._release(keys=[lock, _waiting(record)], args=[record.id]) or None

    # -- tool results ------------------------------------------------------------------------

    def put_tool_result(self, task_id: str, step: int, call_id: str, msg: AgentMessage) -> int:
        """Store one call's result (first write wins); returns how many results are in."""
        key = keys.task_tool_results(task_id, step)
        pipe = self.r.pipeline()
        pipe.hsetnx(key, call_id, msg.model_dump_json())
        pipe.hlen(key)
        pipe.expire(key, 7 * 24 * 3600)
        return pipe.execute()[1]

    def has_tool_result(self, task_id: str, step: int, call_id: str) -> bool:
        return bool(self.r.hexists(keys.task_tool_results(task_id, step), call_id))

    def tool_results(self, task_id: str, step: int, call_ids: list[str]) -> list[AgentMessage]:
        """Results in the order the model made the calls."""
        raw = self.r.hmget(keys.task_tool_results(task_id, step), call_ids)
        return [AgentMessage.model_validate_json(m) for m in raw if m is not None]

    def claim_advance(self, task_id: str, step: int) -> bool:
        """True for exactly one caller: the one that enqueues the next step."""
        return bool(self.r.hsetnx(keys.task(task_id), f"advanced:{step}", "1"))


def _waiting(record: TaskRecord) -> str:
    return keys.session_lock(record.tenant, record.session_id) + ":waiting"


def _stamp(fields: dict[str, str]) -> dict[str, str]:
    out = {k: v if isinstance(v, str) else json.dumps(v) for k, v in fields.items()}
    out["updated_at"] = json.dumps(time.time())
    return out
