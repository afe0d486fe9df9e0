"""The Python client for the gateway: submit tasks, list and read them, follow their events
live; put files into a session's sandbox and take them out; fetch what a task's tools made.
`TaskyardClient` blocks, `AsyncTaskyardClient` is its twin; both build the same requests
and read the same answers (the helpers below), only the I/O differs.

Events are read per the server-sent events specification (httpx-sse: multi-line data, `data:`
with or without a space, comments), and a dropped stream is resumed by `Last-Event-ID`.

Errors, one class per reason (each carries the server's own words in `reason`), under the
root of every taskyard error:

    TaskyardError (shared.errors)
    └── ClientError
        ├── Unauthorized        401: missing or unknown API key
        ├── NotFound            404: no such task (or session, call, file) for this key
        ├── InvalidRequest      400, 409, 413, 422: the request cannot be taken as it is
        ├── ServerError         5xx (and any other answer the gateway should not give)
        └── GatewayUnreachable  no answer at all: refused, timed out, dropped
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal, cast

import httpx
import orjson
from httpx_sse import ServerSentEvent, aconnect_sse, connect_sse

from shared.errors import TaskyardError
from shared.events import Event, EventKind

__all__ = [
    "AsyncTaskyardClient",
    "ClientError",
    "GatewayUnreachable",
    "InvalidRequest",
    "MissedRuns",
    "NotFound",
    "ServerError",
    "SessionBusy",
    "TaskyardClient",
    "TaskyardError",
    "Unauthorized",
]

_RECONNECTS = 5
# What a task does while its session runs another (None: its agent's default, else enqueue).
SessionBusy = Literal["enqueue", "reject", "interrupt", "rollback"]
# What a schedule does about run times missed while the scheduler was down.
MissedRuns = Literal["run_once", "skip"]
_UNAVAILABLE_RETRIES = 5  # 503s (Redis restarting) a safe request is sent again after


class ClientError(TaskyardError):
    """The gateway refused the request, or could not be reached; `reason` says why."""

    def __init__(self, reason: str, status: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status


class Unauthorized(ClientError):
    """401: the API key is missing or unknown."""


class NotFound(ClientError):
    """404: no such task (or session, held call, file, artifact) for this API key."""


class InvalidRequest(ClientError):
    """400, 409, 413, 422: the request is not valid, or not in the task's current state."""


class ServerError(ClientError):
    """A 5xx answer, or another the gateway does not give by design."""


class GatewayUnreachable(ClientError):
    """No answer: the connection was refused, timed out or dropped."""


_BY_STATUS: dict[int, type[ClientError]] = {
    401: Unauthorized,
    404: NotFound,
    400: InvalidRequest,
    409: InvalidRequest,
    413: InvalidRequest,
    422: InvalidRequest,
}


class TaskyardClient:
    """A thin, blocking client over the gateway's HTTP API."""

    def __init__(self, base_url: str, api_key: str, timeout: float = 30.0) -> None:
        self.http = httpx.Client(base_url=base_url, headers=_auth(api_key), timeout=timeout)

    def submit(
        self,
        text: str,
        session_id: str | None = None,
        agent: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
        webhook: dict[str, Any] | None = None,
        files: Sequence[str] = (),
        if_session_busy: SessionBusy | None = None,
    ) -> dict[str, Any]:
        """Submit a task; its id, status and session. `files` names files uploaded to the
        session that it works on; while the session runs another task, it waits its turn
        (`if_session_busy="enqueue"`), is refused (`"reject"`), or cancels that task and starts
        now, keeping its committed steps in the session's memory (`"interrupt"`) or removing
        them (`"rollback"`); unset, the agent's default applies. Without an `idempotency_key`
        one is made, so a submission retried after a 503 is never made twice."""
        body, headers = _submission(
            text, session_id, agent, idempotency_key, webhook, files, if_session_busy
        )
        return self._json("POST", "/v1/tasks", json=body, headers=headers)

    def get(self, task_id: str) -> dict[str, Any]:
        """The task's status, result and messages."""
        return self._json("GET", f"/v1/tasks/{task_id}")

    def list_tasks(
        self,
        limit: int = 20,
        status: str | None = None,
        session_id: str | None = None,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        """Your tasks, newest first: ``{"tasks": [...], "next_cursor": ...}``."""
        params = _list_params(limit, status, session_id, cursor)
        return self._json("GET", "/v1/tasks", params=params)

    def cancel(self, task_id: str) -> dict[str, Any]:
        """End the task now (409 if it has ended already)."""
        return self._json("POST", f"/v1/tasks/{task_id}/cancel")

    def approve(
        self, task_id: str, call_id: str, arguments: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Let a call held for approval run (with `arguments` instead of the model's)."""
        return self._json("POST", _approval_path(task_id, call_id), json=_approval(arguments))

    def deny(self, task_id: str, call_id: str, reason: str | None = None) -> dict[str, Any]:
        """Refuse a call held for approval; the model reads the reason as its result."""
        return self._json("POST", _approval_path(task_id, call_id), json=_denial(reason))

    def events(self, task_id: str, last_event_id: str | None = None) -> Iterator[Event]:
        """Every event of the task until its final one, resuming after a dropped connection
        (`_RECONNECTS` tries in a row, with backoff, before `GatewayUnreachable`)."""
        resume = _Resume(last_event_id)
        while not resume.done:
            try:
                with connect_sse(
                    self.http, "GET", _events_path(task_id), headers=resume.headers(), timeout=None
                ) as source:
                    if source.response.is_error:
                        source.response.read()
                        _raise_for(source.response)
                    for sse in source.iter_sse():
                        if (event := resume.take(sse)) is not None:
                            yield event
                            if event.is_final:
                                return
            except httpx.TransportError as exc:
                time.sleep(resume.failed(exc))

    def _json(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        for attempt in range(_UNAVAILABLE_RETRIES + 1):
            try:
                response = self.http.request(method, path, **kwargs)
            except httpx.TransportError as exc:
                raise _unreachable(exc) from exc
            if (wait := _retry_after(response, method, kwargs, attempt)) is None:
                break
            time.sleep(wait)
        _raise_for(response)
        return _object(response)

    def session(
        self, session_id: str, offset: int = 0, limit: int = 100, memory: str = "memory"
    ) -> dict[str, Any]:
        """A page of the session's messages (of a sub-agent's memory: ``writer.memory``), its
        tasks, what runs it, its interpreter."""
        params = {"offset": offset, "limit": limit, "memory": memory}
        return self._json("GET", f"/v1/sessions/{session_id}", params=params)

    def delete_session(self, session_id: str, force: bool = False) -> None:
        """Forget the session (409 while a task runs it, unless `force` cancels that task)."""
        self._json("DELETE", f"/v1/sessions/{session_id}", params=_force(force))

    def list_sessions(self, limit: int = 20, cursor: str | None = None) -> dict[str, Any]:
        """Your sessions, the most recently used first: ``{"sessions": [...],
        "next_cursor": ...}``."""
        return self._json("GET", "/v1/sessions", params=_page(limit, cursor))

    def create_schedule(
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
        body = _schedule(cron, text, session_id, agent, missed, name, if_session_busy)
        return self._json("POST", "/v1/schedules", json=body)

    def list_schedules(self) -> list[dict[str, Any]]:
        """Your schedules, newest first."""
        return list(self._json("GET", "/v1/schedules")["schedules"])

    def schedule(self, schedule_id: str) -> dict[str, Any]:
        """A schedule: its cron, task, next run time and counts."""
        return self._json("GET", f"/v1/schedules/{schedule_id}")

    def schedule_runs(self, schedule_id: str, limit: int = 50) -> list[dict[str, Any]]:
        """The schedule's latest runs, newest first: the task each made and its status, or
        why it made none."""
        found = self._json("GET", f"/v1/schedules/{schedule_id}/runs", params={"limit": limit})
        return list(found["runs"])

    def delete_schedule(self, schedule_id: str) -> None:
        """Stop the schedule (the tasks it made stay)."""
        self._json("DELETE", f"/v1/schedules/{schedule_id}")

    def system(self) -> dict[str, Any]:
        """What runs the tasks: the queues' depths, the workers, the model replicas."""
        return self._json("GET", "/v1/system")

    def webhook_secret(self) -> str:
        """What this tenant's webhook deliveries are signed with (`shared.webhooks.verify`)."""
        secret: str = self._json("GET", "/v1/webhooks/secret")["secret"]
        return secret

    def upload(
        self, session_id: str, content: bytes | Path, path: str | None = None
    ) -> dict[str, Any]:
        """Put a file (bytes, or a local file) into the session's sandbox at `path` (by default
        the local file's name); its description as the sandbox has it."""
        files, data = _upload(content, path)
        # The gateway bounds the wait (TASKYARD_FILES_TIMEOUT_S).
        path_ = f"/v1/sessions/{session_id}/files"
        return self._json("POST", path_, files=files, data=data, timeout=None)

    def files(self, session_id: str) -> list[dict[str, Any]]:
        """The files in the session's working directory."""
        path = f"/v1/sessions/{session_id}/files"
        files: list[dict[str, Any]] = self._json("GET", path, timeout=None)["files"]
        return files

    def download(self, session_id: str, path: str) -> bytes:
        """A file of the session's working directory."""
        return self._bytes(f"/v1/sessions/{session_id}/files/{path}")

    def artifacts(self, task_id: str) -> list[dict[str, Any]]:
        """What the task's tools made (figures, tables), each with its `url`."""
        path = f"/v1/tasks/{task_id}/artifacts"
        artifacts: list[dict[str, Any]] = self._json("GET", path)["artifacts"]
        return artifacts

    def save_artifact(self, url: str, folder: Path) -> Path:
        """Download an artifact (its `url`, from `artifacts` or an `artifact` event) into
        `folder` under its own name; the file's path."""
        return _save(folder, url, self._bytes(url))

    def _bytes(self, path: str) -> bytes:
        try:
            response = self.http.get(path, timeout=None)
        except httpx.TransportError as exc:
            raise _unreachable(exc) from exc
        _raise_for(response)
        return response.content

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> TaskyardClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncTaskyardClient:
    """The async twin of `TaskyardClient`: the same methods, awaited (`events` is iterated
    with ``async for``)."""

    def __init__(self, base_url: str, api_key: str, timeout: float = 30.0) -> None:
        self.http = httpx.AsyncClient(base_url=base_url, headers=_auth(api_key), timeout=timeout)

    async def submit(
        self,
        text: str,
        session_id: str | None = None,
        agent: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
        webhook: dict[str, Any] | None = None,
        files: Sequence[str] = (),
        if_session_busy: SessionBusy | None = None,
    ) -> dict[str, Any]:
        body, headers = _submission(
            text, session_id, agent, idempotency_key, webhook, files, if_session_busy
        )
        return await self._json("POST", "/v1/tasks", json=body, headers=headers)

    async def get(self, task_id: str) -> dict[str, Any]:
        return await self._json("GET", f"/v1/tasks/{task_id}")

    async def list_tasks(
        self,
        limit: int = 20,
        status: str | None = None,
        session_id: str | None = None,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        params = _list_params(limit, status, session_id, cursor)
        return await self._json("GET", "/v1/tasks", params=params)

    async def cancel(self, task_id: str) -> dict[str, Any]:
        return await self._json("POST", f"/v1/tasks/{task_id}/cancel")

    async def approve(
        self, task_id: str, call_id: str, arguments: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        path = _approval_path(task_id, call_id)
        return await self._json("POST", path, json=_approval(arguments))

    async def deny(self, task_id: str, call_id: str, reason: str | None = None) -> dict[str, Any]:
        return await self._json("POST", _approval_path(task_id, call_id), json=_denial(reason))

    async def events(self, task_id: str, last_event_id: str | None = None) -> AsyncIterator[Event]:
        resume = _Resume(last_event_id)
        while not resume.done:
            try:
                async with aconnect_sse(
                    self.http, "GET", _events_path(task_id), headers=resume.headers(), timeout=None
                ) as source:
                    if source.response.is_error:
                        await source.response.aread()
                        _raise_for(source.response)
                    async for sse in source.aiter_sse():
                        if (event := resume.take(sse)) is not None:
                            yield event
                            if event.is_final:
                                return
            except httpx.TransportError as exc:
                await asyncio.sleep(resume.failed(exc))

    async def _json(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        for attempt in range(_UNAVAILABLE_RETRIES + 1):
            try:
                response = await self.http.request(method, path, **kwargs)
            except httpx.TransportError as exc:
                raise _unreachable(exc) from exc
            if (wait := _retry_after(response, method, kwargs, attempt)) is None:
                break
            await asyncio.sleep(wait)
        _raise_for(response)
        return _object(response)

    async def session(
        self, session_id: str, offset: int = 0, limit: int = 100, memory: str = "memory"
    ) -> dict[str, Any]:
        params = {"offset": offset, "limit": limit, "memory": memory}
        return await self._json("GET", f"/v1/sessions/{session_id}", params=params)

    async def delete_session(self, session_id: str, force: bool = False) -> None:
        await self._json("DELETE", f"/v1/sessions/{session_id}", params=_force(force))

    async def list_sessions(self, limit: int = 20, cursor: str | None = None) -> dict[str, Any]:
        return await self._json("GET", "/v1/sessions", params=_page(limit, cursor))

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
        body = _schedule(cron, text, session_id, agent, missed, name, if_session_busy)
        return await self._json("POST", "/v1/schedules", json=body)

    async def list_schedules(self) -> list[dict[str, Any]]:
        return list((await self._json("GET", "/v1/schedules"))["schedules"])

    async def schedule(self, schedule_id: str) -> dict[str, Any]:
        return await self._json("GET", f"/v1/schedules/{schedule_id}")

    async def schedule_runs(self, schedule_id: str, limit: int = 50) -> list[dict[str, Any]]:
        path = f"/v1/schedules/{schedule_id}/runs"
        return list((await self._json("GET", path, params={"limit": limit}))["runs"])

    async def delete_schedule(self, schedule_id: str) -> None:
        await self._json("DELETE", f"/v1/schedules/{schedule_id}")

    async def system(self) -> dict[str, Any]:
        return await self._json("GET", "/v1/system")

    async def webhook_secret(self) -> str:
        secret: str = (await self._json("GET", "/v1/webhooks/secret"))["secret"]
        return secret

    async def upload(
        self, session_id: str, content: bytes | Path, path: str | None = None
    ) -> dict[str, Any]:
        files, data = _upload(content, path)
        path_ = f"/v1/sessions/{session_id}/files"
        return await self._json("POST", path_, files=files, data=data, timeout=None)

    async def files(self, session_id: str) -> list[dict[str, Any]]:
        path = f"/v1/sessions/{session_id}/files"
        files: list[dict[str, Any]] = (await self._json("GET", path, timeout=None))["files"]
        return files

    async def download(self, session_id: str, path: str) -> bytes:
        return await self._bytes(f"/v1/sessions/{session_id}/files/{path}")

    async def artifacts(self, task_id: str) -> list[dict[str, Any]]:
        path = f"/v1/tasks/{task_id}/artifacts"
        artifacts: list[dict[str, Any]] = (await self._json("GET", path))["artifacts"]
        return artifacts

    async def save_artifact(self, url: str, folder: Path) -> Path:
        return _save(folder, url, await self._bytes(url))

    async def _bytes(self, path: str) -> bytes:
        try:
            response = await self.http.get(path, timeout=None)
        except httpx.TransportError as exc:
            raise _unreachable(exc) from exc
        _raise_for(response)
        return response.content

    async def close(self) -> None:
        await self.http.aclose()

    async def __aenter__(self) -> AsyncTaskyardClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


# -- what both clients share ---------------------------------------------------------------


class _Resume:
    """Where a followed stream stands: the last event id, the reconnects in a row."""

    def __init__(self, last_event_id: str | None) -> None:
        self.last_event_id = last_event_id
        self.failures = 0
        self.done = False

    def headers(self) -> dict[str, str]:
        return {"Last-Event-ID": self.last_event_id} if self.last_event_id else {}

    def take(self, sse: ServerSentEvent) -> Event | None:
        """The event, or None for a kind this client does not know (as a browser's
        EventSource ignores events nobody listens to) and for one with no data, which the SSE
        specification does not dispatch: httpx-sse yields one for the blank line after a
        keep-alive comment once an id was seen (florimondmanca/httpx-sse#35)."""
        self.last_event_id, self.failures = sse.id or self.last_event_id, 0
        if not sse.data or sse.event not in _KINDS:
            return None
        event = Event(id=sse.id, kind=EventKind(sse.event), data=orjson.loads(sse.data))
        self.done = event.is_final
        return event

    def failed(self, exc: httpx.TransportError) -> float:
        """Seconds to wait before reconnecting; raises once the tries are used up."""
        self.failures += 1
        if self.failures > _RECONNECTS:
            raise _unreachable(exc) from exc
        return min(0.1 * 2.0**self.failures, 2.0)


_KINDS = frozenset(kind.value for kind in EventKind)


def _object(response: httpx.Response) -> dict[str, Any]:
    """The answer's JSON object: every gateway answer with a body is one (a 204 has none)."""
    return cast("dict[str, Any]", response.json()) if response.content else {}


def _raise_for(response: httpx.Response) -> None:
    """Raise the error an answer (its body read) means, if it is one."""
    if response.is_success:
        return
    kind = _BY_STATUS.get(response.status_code, ServerError)
    raise kind(_reason(response), response.status_code)


def _reason(response: httpx.Response) -> str:
    """The server's reason: its `detail` sentence, or each invalid field and why."""
    try:
        detail = response.json()["detail"]
    except (ValueError, KeyError, TypeError):
        return f"HTTP {response.status_code}: {response.text[:200] or response.reason_phrase}"
    if isinstance(detail, list):
        return "; ".join(f"{'.'.join(map(str, i['loc']))}: {i['msg']}" for i in detail)
    return str(detail)


def _unreachable(exc: httpx.TransportError) -> GatewayUnreachable:
    where = exc.request.url.copy_with(path="/", query=None) if exc.request else "the gateway"
    return GatewayUnreachable(f"cannot reach the gateway at {where}: {exc or type(exc).__name__}")


def _auth(api_key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"}


def _events_path(task_id: str) -> str:
    return f"/v1/tasks/{task_id}/events"


def _approval_path(task_id: str, call_id: str) -> str:
    return f"/v1/tasks/{task_id}/approvals/{call_id}"


def _approval(arguments: dict[str, Any] | None) -> dict[str, Any]:
    body: dict[str, Any] = {"decision": "approve"}
    if arguments is not None:
        body["arguments"] = arguments
    return body


def _denial(reason: str | None) -> dict[str, Any]:
    return {"decision": "deny", "reason": reason}


def _submission(
    text: str,
    session_id: str | None,
    agent: dict[str, Any] | None,
    idempotency_key: str | None,
    webhook: dict[str, Any] | None,
    files: Sequence[str],
    if_session_busy: SessionBusy | None,
) -> tuple[dict[str, Any], dict[str, str]]:
    body: dict[str, Any] = {"input": text}
    if if_session_busy:
        body["if_session_busy"] = if_session_busy
    if session_id:
        body["session_id"] = session_id
    if agent:
        body["agent"] = agent
    if webhook:
        body["webhook"] = webhook
    if files:
        body["files"] = list(files)
    return body, {"Idempotency-Key": idempotency_key or uuid.uuid4().hex}


def _schedule(
    cron: str,
    text: str,
    session_id: str | None,
    agent: dict[str, Any] | None,
    missed: MissedRuns,
    name: str | None,
    if_session_busy: SessionBusy | None,
) -> dict[str, Any]:
    task, _ = _submission(text, session_id, agent, None, None, (), if_session_busy)
    body: dict[str, Any] = {"cron": cron, "missed": missed, "task": task}
    if name:
        body["name"] = name
    return body


def _retry_after(
    response: httpx.Response, method: str, request: dict[str, Any], attempt: int
) -> float | None:
    """Seconds to wait before sending a request again that met a 503 (Redis restarting):
    only a read, or a submission under its Idempotency-Key, is safe to send twice."""
    safe = method == "GET" or "Idempotency-Key" in request.get("headers", {})
    if response.status_code != 503 or not safe or attempt >= _UNAVAILABLE_RETRIES:
        return None
    try:
        return min(float(response.headers.get("retry-after", 1)), 10.0)
    except ValueError:
        return 1.0


def _upload(content: bytes | Path, path: str | None) -> tuple[dict[str, Any], dict[str, str]]:
    """The multipart form of an upload: the file, and its path in the sandbox."""
    target: str | None
    if isinstance(content, Path):
        data, target = content.read_bytes(), path or content.name
    else:
        data, target = content, path
    if not target:
        raise ValueError("name the file in the sandbox: path=...")
    return {"file": (Path(target).name, data)}, {"path": target}


def _save(folder: Path, url: str, content: bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / Path(url).name
    target.write_bytes(content)
    return target


def _force(force: bool) -> dict[str, str]:
    return {"force": "true"} if force else {}


def _list_params(
    limit: int, status: str | None, session_id: str | None, cursor: str | None
) -> dict[str, str | int]:
    given = {"status": status, "session_id": session_id}
    return {**_page(limit, cursor), **{k: v for k, v in given.items() if v is not None}}


def _page(limit: int, cursor: str | None) -> dict[str, str | int]:
    return {"limit": limit, "cursor": cursor} if cursor else {"limit": limit}
