"""What the client's requests carry: paths, query parameters, JSON bodies, upload forms; and
when a refused request may be sent again. Pure functions, shared by the async core and so by
its blocking twin."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, cast

import httpx

__all__ = [
    "UNAVAILABLE_RETRIES",
    "MissedRuns",
    "SessionBusy",
    "approval",
    "approval_path",
    "auth",
    "denial",
    "events_path",
    "force",
    "fork",
    "json_object",
    "list_params",
    "page",
    "retry_after",
    "save",
    "schedule",
    "submission",
    "upload",
]

# What a task does while its session runs another (None: its agent's default, else enqueue).
SessionBusy = Literal["enqueue", "reject", "interrupt", "rollback"]
# What a schedule does about run times missed while the scheduler was down.
MissedRuns = Literal["run_once", "skip"]
UNAVAILABLE_RETRIES = 5  # 503s (Redis restarting) a safe request is sent again after


def auth(api_key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"}


def events_path(task_id: str) -> str:
    return f"/v1/tasks/{task_id}/events"


def approval_path(task_id: str, call_id: str) -> str:
    return f"/v1/tasks/{task_id}/approvals/{call_id}"


def approval(arguments: dict[str, Any] | None) -> dict[str, Any]:
    body: dict[str, Any] = {"decision": "approve"}
    if arguments is not None:
        body["arguments"] = arguments
    return body


def denial(reason: str | None) -> dict[str, Any]:
    return {"decision": "deny", "reason": reason}


def submission(
    text: str,
    session_id: str | None,
    agent: dict[str, Any] | None,
    idempotency_key: str | None,
    webhook: dict[str, Any] | None,
    files: Sequence[str],
    if_session_busy: SessionBusy | None,
    deadline_s: float | None,
) -> tuple[dict[str, Any], dict[str, str]]:
    """A task's body, and its headers: an Idempotency-Key, made if none is given."""
    body: dict[str, Any] = {"input": text}
    if if_session_busy:
        body["if_session_busy"] = if_session_busy
    if session_id:
        body["session_id"] = session_id
    if deadline_s is not None:  # one of the agent spec's limits
        agent = {**(agent or {}), "deadline_s": deadline_s}
    if agent:
        body["agent"] = agent
    if webhook:
        body["webhook"] = webhook
    if files:
        body["files"] = list(files)
    return body, {"Idempotency-Key": idempotency_key or uuid.uuid4().hex}


def schedule(
    cron: str,
    text: str,
    session_id: str | None,
    agent: dict[str, Any] | None,
    missed: MissedRuns,
    name: str | None,
    if_session_busy: SessionBusy | None,
) -> dict[str, Any]:
    task, _ = submission(text, session_id, agent, None, None, (), if_session_busy, None)
    body: dict[str, Any] = {"cron": cron, "missed": missed, "task": task}
    if name:
        body["name"] = name
    return body


def retry_after(
    response: httpx.Response, method: str, request: dict[str, Any], attempt: int
) -> float | None:
    """Seconds to wait before sending a request again that met a 503 (Redis restarting):
    only a read, or a submission under its Idempotency-Key, is safe to send twice."""
    safe = method == "GET" or "Idempotency-Key" in request.get("headers", {})
    if response.status_code != 503 or not safe or attempt >= UNAVAILABLE_RETRIES:
        return None
    try:
        return min(float(response.headers.get("retry-after", 1)), 10.0)
    except ValueError:
        return 1.0


def json_object(response: httpx.Response) -> dict[str, Any]:
    """The answer's JSON object: every gateway answer with a body is one (a 204 has none)."""
    return cast("dict[str, Any]", response.json()) if response.content else {}


def upload(content: bytes | Path, path: str | None) -> tuple[dict[str, Any], dict[str, str]]:
    """The multipart form of an upload: the file, and its path in the sandbox."""
    target: str | None
    if isinstance(content, Path):
        data, target = content.read_bytes(), path or content.name
    else:
        data, target = content, path
    if not target:
        raise ValueError("name the file in the sandbox: path=...")
    return {"file": (Path(target).name, data)}, {"path": target}


def save(folder: Path, url: str, content: bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / Path(url).name
    target.write_bytes(content)
    return target


def fork(new_session_id: str | None) -> dict[str, str]:
    return {"session_id": new_session_id} if new_session_id is not None else {}


def force(force: bool) -> dict[str, str]:
    return {"force": "true"} if force else {}


def list_params(
    limit: int, status: str | None, session_id: str | None, cursor: str | None
) -> dict[str, str | int]:
    given = {"status": status, "session_id": session_id}
    return {**page(limit, cursor), **{k: v for k, v in given.items() if v is not None}}


def page(limit: int, cursor: str | None) -> dict[str, str | int]:
    return {"limit": limit, "cursor": cursor} if cursor else {"limit": limit}
