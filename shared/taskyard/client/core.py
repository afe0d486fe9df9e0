"""The client's requests, written once as coroutines over a `GatewayIO`; `AsyncTaskyardClient`
is this core on an event loop, and `TaskyardClient` (`blocking.py`) the same core on blocking
I/O."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import httpx

from taskyard.client import wire
from taskyard.client.errors import raise_for
from taskyard.client.io import AsyncIO, GatewayIO
from taskyard.client.stream import task_events
from taskyard.client.wire import MissedRuns, SessionBusy
from taskyard.runtime.events import Event

__all__ = ["AsyncTaskyardClient", "ClientCore"]


class ClientCore:
    """Every request to the gateway: build it, send it (again after a 503 where that is
    safe), read the answer or raise the `ClientError` it means."""

    def __init__(self, io: GatewayIO) -> None:
        self.io = io

    async def submit(
        self,
        text: str,
        session_id: str | None = None,
        agent: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
        webhook: dict[str, Any] | None = None,
        files: Sequence[str] = (),
        if_session_busy: SessionBusy | None = None,
        deadline_s: float | None = None,
    ) -> dict[str, Any]:
        """Submit a task; its id, status and session. `files` names files uploaded to the
        session that it works on; while the session runs another task, it waits its turn
        (`if_session_busy="enqueue"`), is refused (`"reject"`), or cancels that task and starts
        now, keeping its committed steps in the session's memory (`"interrupt"`) or removing
        them (`"rollback"`); unset, the agent's default applies. `deadline_s` (the agent's
        `deadline_s`): seconds it may run before it ends timed_out; unset, the deployment's
        default; over your tenant's maximum, `InvalidRequest`. Without an `idempotency_key`
        one is made, so a submission retried after a 503 is never made twice."""
        body, headers = wire.submission(
            text, session_id, agent, idempotency_key, webhook, files, if_session_busy, deadline_s
        )
        return await self._json("POST", "/v1/tasks", json=body, headers=headers)

    async def get(self, task_id: str) -> dict[str, Any]:
        """The task's status, result and messages."""
        return await self._json("GET", f"/v1/tasks/{task_id}")

    async def list_tasks(
        self,
        limit: int = 20,
        status: str | None = None,
        session_id: str | None = None,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        """Your tasks, newest first: ``{"tasks": [...], "next_cursor": ...}``."""
        params = wire.list_params(limit, status, session_id, cursor)
        return await self._json("GET", "/v1/tasks", params=params)

    async def cancel(self, task_id: str) -> dict[str, Any]:
        """End the task now (409 if it has ended already)."""
        return await self._json("POST", f"/v1/tasks/{task_id}/cancel")

    async def approve(
        self, task_id: str, call_id: str, arguments: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Let a call held for approval run (with `arguments` instead of the model's)."""
        path = wire.approval_path(task_id, call_id)
        return await self._json("POST", path, json=wire.approval(arguments))

    async def deny(self, task_id: str, call_id: str, reason: str | None = None) -> dict[str, Any]:
        """Refuse a call held for approval; the model reads the reason as its result."""
        path = wire.approval_path(task_id, call_id)
        return await self._json("POST", path, json=wire.denial(reason))

    def events(self, task_id: str, last_event_id: str | None = None) -> AsyncIterator[Event]:
        """Every event of the task until its final one, resuming after a dropped connection
        (five tries in a row, with backoff, before `GatewayUnreachable`)."""
        return task_events(self.io, task_id, last_event_id)

    async def session(
        self, session_id: str, offset: int = 0, limit: int = 100, memory: str = "memory"
    ) -> dict[str, Any]:
        """A page of the session's messages (of a sub-agent's memory: ``writer.memory``), its
        tasks, what runs it, its interpreter."""
        params = {"offset": offset, "limit": limit, "memory": memory}
        return await self._json("GET", f"/v1/sessions/{session_id}", params=params)

    async def delete_session(self, session_id: str, force: bool = False) -> None:
        """Forget the session (409 while a task runs it, unless `force` cancels that task)."""
        await self._json("DELETE", f"/v1/sessions/{session_id}", params=wire.force(force))

    async def fork_session(
        self, session_id: str, new_session_id: str | None = None
    ) -> dict[str, Any]:
        """Fork the session into a new one (`new_session_id`, or one made for you) holding a
        copy of its memory and, live, of its interpreter: ``{"session_id", "forked_from",
        "interpreter": "copied" | "none", "skipped": {name: why}}`` (`skipped`: what the copy
        left out). 409 while a task or a cell runs in it or the new id is taken."""
        path, body = f"/v1/sessions/{session_id}/fork", wire.fork(new_session_id)
        return await self._json("POST", path, json=body)

    async def list_sessions(self, limit: int = 20, cursor: str | None = None) -> dict[str, Any]:
        """Your sessions, the most recently used first: ``{"sessions": [...],
        "next_cursor": ...}``."""
        return await self._json("GET", "/v1/sessions", params=wire.page(limit, cursor))

    async def create_schedule(
        self,
        cron: str,
        text: str,
        session_id: str | None = None,
        agent: dict[str, Any] | None = None,
        missed: MissedRuns = "run_once",
        name: str | None = None,
        if_session_busy: SessionBusy | None = None,
    ) -> dict[str, Any]:
        """Submit `text` as a task at each run time of `cron` (UTC; five fields, or six with
        seconds), in `session_id` or a fresh session each run; runs missed while the
        scheduler was down run once late (`missed="run_once"`) or are skipped (`"skip"`)."""
        body = wire.schedule(cron, text, session_id, agent, missed, name, if_session_busy)
        return await self._json("POST", "/v1/schedules", json=body)

    async def list_schedules(self) -> list[dict[str, Any]]:
        """Your schedules, newest first."""
        return list((await self._json("GET", "/v1/schedules"))["schedules"])

    async def schedule(self, schedule_id: str) -> dict[str, Any]:
        """A schedule: its cron, task, next run time and counts."""
        return await self._json("GET", f"/v1/schedules/{schedule_id}")

    async def schedule_runs(self, schedule_id: str, limit: int = 50) -> list[dict[str, Any]]:
        """The schedule's latest runs, newest first: the task each made and its status, or
        why it made none."""
        path = f"/v1/schedules/{schedule_id}/runs"
        return list((await self._json("GET", path, params={"limit": limit}))["runs"])

    async def delete_schedule(self, schedule_id: str) -> None:
        """Stop the schedule (the tasks it made stay)."""
        await self._json("DELETE", f"/v1/schedules/{schedule_id}")

    async def system(self) -> dict[str, Any]:
        """What runs the tasks: the queues' depths, the workers, the model replicas."""
        return await self._json("GET", "/v1/system")

    async def webhook_secret(self) -> str:
        """What this tenant's webhook deliveries are signed with: a receiver checks each
        with `taskyard.client.webhooks.verify`."""
        secret: str = (await self._json("GET", "/v1/webhooks/secret"))["secret"]
        return secret

    async def upload(
        self, session_id: str, content: bytes | Path, path: str | None = None
    ) -> dict[str, Any]:
        """Put a file (bytes, or a local file) into the session's sandbox at `path` (by default
        the local file's name); its description as the sandbox has it."""
        files, data = wire.upload(content, path)
        # The gateway bounds the wait (TASKYARD_FILES_TIMEOUT_S).
        path_ = f"/v1/sessions/{session_id}/files"
        return await self._json("POST", path_, files=files, data=data, timeout=None)

    async def files(self, session_id: str) -> list[dict[str, Any]]:
        """The files in the session's working directory."""
        path = f"/v1/sessions/{session_id}/files"
        files: list[dict[str, Any]] = (await self._json("GET", path, timeout=None))["files"]
        return files

    async def download(self, session_id: str, path: str) -> bytes:
        """A file of the session's working directory."""
        return await self._bytes(f"/v1/sessions/{session_id}/files/{path}")

    async def artifacts(self, task_id: str) -> list[dict[str, Any]]:
        """What the task's tools made (figures, tables), each with its `url`."""
        path = f"/v1/tasks/{task_id}/artifacts"
        artifacts: list[dict[str, Any]] = (await self._json("GET", path))["artifacts"]
        return artifacts

    async def save_artifact(self, url: str, folder: Path) -> Path:
        """Download an artifact (its `url`, from `artifacts` or an `artifact` event) into
        `folder` under its own name; the file's path."""
        return wire.save(folder, url, await self._bytes(url))

    async def close(self) -> None:
        await self.io.close()

    async def _json(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        for attempt in range(wire.UNAVAILABLE_RETRIES + 1):
            response = await self.io.request(method, path, **kwargs)
            if (wait := wire.retry_after(response, method, kwargs, attempt)) is None:
                break
            await self.io.sleep(wait)
        raise_for(response)
        return wire.json_object(response)

    async def _bytes(self, path: str) -> bytes:
        response = await self.io.request("GET", path, timeout=None)
        raise_for(response)
        return response.content


class AsyncTaskyardClient(ClientCore):
    """A thin async client over the gateway's HTTP API (`events` is iterated with
    ``async for``); `TaskyardClient` is its blocking twin."""

    def __init__(self, base_url: str, api_key: str, timeout: float = 30.0) -> None:
        self.http = httpx.AsyncClient(
            base_url=base_url, headers=wire.auth(api_key), timeout=timeout
        )
        super().__init__(AsyncIO(self.http))

    async def __aenter__(self) -> AsyncTaskyardClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
