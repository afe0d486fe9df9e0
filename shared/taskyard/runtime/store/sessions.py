"""A session as a whole: what it holds (messages, tasks, its interpreter), copying it into a
fork, and forgetting it.

A session is its memory lists (one per agent of the tree, named in a set as they are
written), its values (the tree's `SessionValues`), its task index, its lock and waiting
list, the session it was forked from if it was, and its tool state (the browser's results
and pages; the interpreter, which the tool worker announces while it lives).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import orjson

from taskyard.agentkit.schema import AgentMessage
from taskyard.plumbing import keys
from taskyard.runtime.jobs import Envelope
from taskyard.runtime.store import redis_replies
from taskyard.runtime.store.documents import ForkSessionDoc
from taskyard.runtime.store.script_keys import ForkSessionKeys
from taskyard.runtime.store.script_replies import FORK_SESSION, decode
from taskyard.runtime.store.store import TaskStore

__all__ = [
    "SessionCopy",
    "SessionOverview",
    "SessionState",
    "copy_session",
    "forget_session",
    "overviews",
    "session_state",
]


@dataclass(frozen=True, slots=True)
class SessionState:
    messages: list[AgentMessage]  # a page of the memory asked for
    total_messages: int  # in that memory
    task_ids: list[str]
    running: str | None  # the task holding the session
    waiting: list[str]  # tasks waiting their turn, oldest first
    interpreter: dict[str, Any] | None  # what the tool worker last said of it
    memories: dict[str, int]  # every memory of the agent tree written: path to its length
    values: dict[str, Any]  # the tree's session values by path
    forked_from: str | None = None  # the session it was forked from

    @property
    def exists(self) -> bool:
        return bool(
            self.total_messages or self.memories or self.task_ids or self.running
            or self.forked_from
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class SessionOverview:
    """A session in a list: where it stands, without its messages."""

    session_id: str
    last_task_at: float  # its latest task's creation time
    task_count: int
    running: str | None
    waiting: int
    total_messages: int  # in the top agent's memory
    interpreter: dict[str, Any] | None
    forked_from: str | None = None


async def overviews(
    store: TaskStore, tenant: str, listed: list[tuple[str, float]]
) -> list[SessionOverview]:
    """Where each listed session (its id, its latest task's time) stands, in one round trip."""
    if not listed:
        return []
    async with store.r.pipeline(transaction=False) as pipe:
        for session_id, _ in listed:
            pipe.zcard(keys.session_tasks(tenant, session_id))
            pipe.get(keys.session_lock(tenant, session_id))
            pipe.llen(keys.session_waiting(tenant, session_id))
            pipe.llen(keys.session_memory(tenant, session_id))
            pipe.hgetall(keys.session_sandbox(keys.session_key(tenant, session_id)))
            pipe.get(keys.session_origin(tenant, session_id))
        found = await pipe.execute()
    per = len(found) // len(listed)  # the replies of each session
    rows = [found[i : i + per] for i in range(0, len(found), per)]
    return [
        SessionOverview(session_id, at, count, holder, waiting, messages,
                        _interpreter(redis_replies.fields(sandbox)) if sandbox else None,
                        redis_replies.text(origin))
        for (session_id, at), (count, holder, waiting, messages, sandbox, origin) in zip(
            listed, rows, strict=True)
    ]  # fmt: skip


async def session_state(
    store: TaskStore, tenant: str, session_id: str, offset: int, limit: int, tasks: int = 50,
    path: str = "memory",
) -> SessionState:  # fmt: skip
    """The messages `offset`..`offset+limit` of the memory at `path` (the top agent's by
    default, or a sub-agent's: ``writer.memory``), the session's other memories and values,
    its latest tasks, who holds it."""
    memory = keys.session_memory(tenant, session_id, path)
    async with store.r.pipeline(transaction=False) as pipe:
        pipe.lrange(memory, offset, offset + limit - 1)
        pipe.llen(memory)
        pipe.zrevrange(keys.session_tasks(tenant, session_id), 0, tasks - 1)
        pipe.get(keys.session_lock(tenant, session_id))
        pipe.lrange(keys.session_waiting(tenant, session_id), 0, -1)
        pipe.hgetall(keys.session_sandbox(keys.session_key(tenant, session_id)))
        pipe.smembers(keys.session_paths(tenant, session_id))
        pipe.hgetall(keys.session_values(tenant, session_id))
        pipe.get(keys.session_origin(tenant, session_id))
        raw, total, task_ids, holder, waiting, sandbox, lists, values, origin = await pipe.execute()
    messages = [AgentMessage.model_validate_json(m) for m in raw]
    interpreter = _interpreter(redis_replies.fields(sandbox)) if sandbox else None
    memories = await _lengths(store, tenant, session_id, lists)
    shown = {name: orjson.loads(value) for name, value in sorted(values.items())}
    return SessionState(messages, total, task_ids, holder, waiting, interpreter, memories, shown,
                        redis_replies.text(origin))  # fmt: skip


def _interpreter(record: dict[str, str]) -> dict[str, Any]:
    """The session's sandbox record as the API shows it: which worker holds the interpreter,
    whether it lives (a handed-over one too: it runs, waiting for the worker that takes it
    over), its last use, why its state was lost if it was."""
    lost = record.get("state") == "lost"
    return {
        "alive": not lost,
        "last_used": float(record.get("last_used") or 0),
        "worker": record.get("node"),
        "lost": record.get("reason") or None if lost else None,
    }


async def _lengths(
    store: TaskStore, tenant: str, session_id: str, lists: set[str]
) -> dict[str, int]:
    """Each written memory list's length, by its `state_dict` path."""
    names = sorted(lists)
    async with store.r.pipeline(transaction=False) as pipe:
        for name in names:
            pipe.llen(name)
        lengths = await pipe.execute()
    paths = [keys.session_memory_path(tenant, session_id, name) for name in names]
    return dict(zip(paths, lengths, strict=True))


@dataclass(frozen=True, slots=True)
class SessionCopy:
    """What `copy_session` did: `forked` (the fork job sent to the source's interpreter's
    holder if `job_sent`), or why not: the source is `missing`, the new id `exists`, or the
    source is `busy` with `task_id` (in `task_status`)."""

    outcome: Literal["forked", "missing", "exists", "busy"]
    job_sent: bool = False
    task_id: str = ""
    task_status: str = ""


async def copy_session(
    store: TaskStore, tenant: str, source_id: str, new_id: str, job: Envelope
) -> SessionCopy:
    """Copy the session `source_id` into a new session `new_id` (its memories, values and
    compaction) and send the fork `job` to the live tool worker holding the source's
    interpreter, if one does: one atomic round trip (`sessions/fork_session.lua`)."""
    source_memory, new_memory = (keys.session_memory(tenant, s) for s in (source_id, new_id))
    keys_ = ForkSessionKeys(
        lock=keys.session_lock(tenant, source_id), waiting=keys.session_waiting(tenant, source_id),
        memory=source_memory, paths=keys.session_paths(tenant, source_id),
        values=keys.session_values(tenant, source_id),
        compaction=keys.session_compaction(tenant, source_id),
        tasks=keys.session_tasks(tenant, source_id), origin=keys.session_origin(tenant, source_id),
        new_memory=new_memory, new_paths=keys.session_paths(tenant, new_id),
        new_values=keys.session_values(tenant, new_id),
        new_compaction=keys.session_compaction(tenant, new_id),
        new_tasks=keys.session_tasks(tenant, new_id),
        new_origin=keys.session_origin(tenant, new_id),
        new_lock=keys.session_lock(tenant, new_id),
        new_waiting=keys.session_waiting(tenant, new_id),
        new_sandbox=keys.session_sandbox(keys.session_key(tenant, new_id)),
        new_epoch=keys.session_epoch(tenant, new_id), tenant_sessions=keys.tenant_sessions(tenant),
    )  # fmt: skip
    doc = ForkSessionDoc(
        **store.databases(), source_memory=source_memory, new_memory=new_memory, new_id=new_id,
        source_id=source_id, source_key=keys.session_key(tenant, source_id), job=job.message,
    )  # fmt: skip
    reply = decode(FORK_SESSION, await store.script("sessions/fork_session", keys_, doc))
    return SessionCopy(reply.outcome, reply.job_sent, reply.task_id, reply.task_status)


async def forget_session(store: TaskStore, tenant: str, session_id: str) -> None:
    """Delete the session's memories, tool state and task index, take it off the tenant's
    session list and bump its epoch, so workers holding a warm copy of it read it afresh
    (empty). Its tasks stay, as tasks (by id, and in the tenant's task list); the session
    itself is no more (404) until a task names it again."""
    session_key = keys.session_key(tenant, session_id)
    names = keys.session_paths(tenant, session_id)
    written = await store.r.smembers(names)
    doomed = [
        keys.session_memory(tenant, session_id), names, *written,
        keys.session_values(tenant, session_id),
        keys.browser_results(session_key), keys.session_sandbox(session_key),
        keys.session_cells(session_key), keys.session_replay(session_key),
        keys.session_compaction(tenant, session_id), keys.session_tasks(tenant, session_id),
        keys.session_origin(tenant, session_id),
    ]  # fmt: skip
    async with store.r.pipeline(transaction=True) as pipe:
        pipe.delete(*doomed)
        pipe.zrem(keys.tenant_sessions(tenant), session_id)  # listed again with its next task
        pipe.incr(keys.session_epoch(tenant, session_id))
        await pipe.execute()
