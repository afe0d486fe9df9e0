"""Forking a live session (`POST /v1/sessions/{id}/fork`): the new session gets a copy of the
source's memory and, where a tool worker holds the source's interpreter, a live copy of that
interpreter (its variables, functions, classes and imports, its open files, its working
directory: `taskyard.sandbox.interpreter_copy`). What cannot be copied (a socket, a thread) is
left out and named in the answer.

One store script (`copy_session`) checks both sessions, copies the memory and, in the same
write, sends a `SessionForkJob` to the own queue of the live tool worker holding the source's
interpreter; the caller then waits on the request's reply list (`ForkExchange`), as the
gateway waits for a session's files. That worker copies the interpreter and places the new
session on itself, beside the source: a fork never crosses tool workers, by construction.
Without a live holder the fork is of the memory alone, and the new session starts a fresh
interpreter on its first cell (`interpreter: "none"`).

A fork is whole or nothing: one the worker refuses (a cell runs in the source; a backend that
cannot fork) or does not answer in time is undone, the new session forgotten.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Literal

import redis.asyncio as aioredis
from celery import Celery
from pydantic import BaseModel, ConfigDict

from taskyard.errors import TaskyardError
from taskyard.plumbing import keys
from taskyard.runtime.cancel import announce_forgotten
from taskyard.runtime.jobs import SessionForkJob, envelope
from taskyard.runtime.store import TaskStore
from taskyard.runtime.store.sessions import SessionCopy, copy_session, forget_session

__all__ = ["ForkExchange", "ForkRefused", "ForkReply", "Forked", "fork_session"]

_REPLY_TTL_S = 60  # an answer nobody took
_SLICE_S = 2.0  # of a wait for the answer

Interpreter = Literal["copied", "none"]
Why = Literal["missing", "exists", "busy", "unavailable", "timeout"]


class ForkRefused(TaskyardError):
    """No fork was made, for the reason named: the source is `missing` (or another
    tenant's), the new id `exists`, the source is `busy` (a task holds it or waits for it, or
    a cell runs in its interpreter), its interpreter is `unavailable` to fork (the backend
    cannot), or its tool worker did not answer in time (`timeout`)."""

    def __init__(self, why: Why, message: str) -> None:
        super().__init__(message)
        self.why = why


@dataclass(frozen=True, slots=True)
class Forked:
    session_id: str
    forked_from: str
    interpreter: Interpreter  # whether a live interpreter was copied
    skipped: dict[str, str] = field(default_factory=dict)  # what it left out, and why


class ForkReply(BaseModel):
    """The tool worker's answer: the interpreter `copied` (but `skipped`: names and files left
    out, each with why), `none` to copy (the source has no running interpreter there), or why
    not (`busy`, `unavailable`; `detail` in words)."""

    model_config = ConfigDict(extra="forbid")

    outcome: Literal["copied", "none", "busy", "unavailable"]
    detail: str = ""
    skipped: dict[str, str] = {}


class ForkExchange:
    """Both ends of a fork request's answer, on a Redis client that decodes responses."""

    def __init__(self, client: aioredis.Redis) -> None:
        self.r = client

    async def wait(self, request_id: str, timeout: float) -> ForkReply | None:
        """The answer, or None if none came within `timeout` seconds. Waited for a slice at
        a time: a blocking pop longer than the client's socket timeout (redis-py's default,
        5 s) fails as a dead connection."""
        reply_key, deadline = keys.session_fork_reply(request_id), time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            popped = await self.r.blpop([reply_key], timeout=min(left, _SLICE_S))
            if popped is not None:
                return ForkReply.model_validate_json(popped[1])
        return None

    async def answer(self, request_id: str, reply: ForkReply) -> None:
        reply_key = keys.session_fork_reply(request_id)
        async with self.r.pipeline(transaction=True) as pipe:
            pipe.rpush(reply_key, reply.model_dump_json())
            pipe.expire(reply_key, _REPLY_TTL_S)
            await pipe.execute()


async def fork_session(
    store: TaskStore, celery: Celery, tenant: str, source_id: str, new_id: str, timeout_s: float
) -> Forked:
    """Fork the tenant's session `source_id` into the new session `new_id` (see the module's
    doc), waiting up to `timeout_s` for the tool worker holding its interpreter. Raises
    `ForkRefused` saying why no fork was made."""
    job = SessionForkJob(tenant=tenant, session_id=source_id, new_session_id=new_id,
                         expires_at=time.time() + timeout_s)  # fmt: skip
    copied = await copy_session(store, tenant, source_id, new_id, envelope(celery, job))
    if copied.outcome != "forked":
        raise _refused(copied, source_id, new_id)
    if not copied.job_sent:
        return Forked(new_id, source_id, "none")
    reply = await ForkExchange(store.r).wait(job.request_id, timeout_s)
    if reply is None or reply.outcome in ("busy", "unavailable"):
        await _undo(store, tenant, new_id)
        raise _not_copied(reply, source_id, timeout_s)
    if reply.outcome == "none":
        return Forked(new_id, source_id, "none")
    return Forked(new_id, source_id, "copied", reply.skipped)


def _refused(copied: SessionCopy, source_id: str, new_id: str) -> ForkRefused:
    if copied.outcome == "missing":
        return ForkRefused("missing", "no such session")
    if copied.outcome == "exists":
        return ForkRefused("exists", f"session {new_id} already exists; fork into a new id")
    return ForkRefused("busy", f"session {source_id} has task {copied.task_id} "
                       f"{copied.task_status}; fork it when it ends")  # fmt: skip


def _not_copied(reply: ForkReply | None, source_id: str, timeout_s: float) -> ForkRefused:
    if reply is None:
        return ForkRefused("timeout", f"the tool worker holding session {source_id}'s "
                           f"interpreter did not answer within {timeout_s:g} s "
                           "(TASKYARD_GATEWAY_FORK_TIMEOUT_S); nothing was forked")  # fmt: skip
    if reply.outcome == "busy":
        return ForkRefused("busy", f"a cell runs in session {source_id}'s interpreter; fork it "
                           "when it ends")  # fmt: skip
    return ForkRefused("unavailable", f"session {source_id}'s interpreter cannot be forked: "
                       f"{reply.detail}")  # fmt: skip


async def _undo(store: TaskStore, tenant: str, new_id: str) -> None:
    """Forget the half-made fork; an interpreter its worker copied after all (its answer came
    too late) stops on the announcement."""
    await forget_session(store, tenant, new_id)
    await announce_forgotten(store.r, keys.session_key(tenant, new_id))
