"""The Python client for the gateway: submit a task, read it, follow its events live; put
files into a session's sandbox and take them out; fetch what a task's tools made."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx

from shared.events import Event, EventKind

__all__ = ["TaskyardClient"]

_RECONNECTS = 5


class TaskyardClient:
    """A thin client over the gateway's HTTP API."""

    def __init__(self, base_url: str, api_key: str, timeout: float = 30.0) -> None:
        self.http = httpx.Client(
            base_url=base_url, headers={"Authorization": f"Bearer {api_key}"}, timeout=timeout
        )

    def submit(
        self,
        text: str,
        session_id: str | None = None,
        agent: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
        files: Sequence[str] = (),
    ) -> dict[str, Any]:
        """Submit a task; `files` names files uploaded to the session that it works on."""
        body: dict[str, Any] = {"input": text}
        if session_id:
            body["session_id"] = session_id
        if agent:
            body["agent"] = agent
        if files:
            body["files"] = list(files)
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        resp = self.http.post("/v1/tasks", json=body, headers=headers)
        resp.raise_for_status()
        return resp.json()

    def get(self, task_id: str) -> dict[str, Any]:
        resp = self.http.get(f"/v1/tasks/{task_id}")
        resp.raise_for_status()
        return resp.json()

    def events(self, task_id: str, last_event_id: str | None = None) -> Iterator[Event]:
        """Every event of the task until its final one, resuming after a dropped connection
        (`_RECONNECTS` tries in a row, with backoff, before the error is raised)."""
        failures = 0
        while True:
            headers = {"Last-Event-ID": last_event_id} if last_event_id else {}
            try:
                for event in self._stream(task_id, headers):
                    last_event_id, failures = event.id, 0
                    yield event
                    if event.is_final:
                        return
            except httpx.TransportError:
                failures += 1
                if failures > _RECONNECTS:
                    raise
                time.sleep(min(0.1 * 2**failures, 2.0))

    def _stream(self, task_id: str, headers: dict[str, str]) -> Iterator[Event]:
        path = f"/v1/tasks/{task_id}/events"
        with self.http.stream("GET", path, headers=headers, timeout=None) as resp:
            resp.raise_for_status()
            fields: dict[str, str] = {}
            for line in resp.iter_lines():
                if line:
                    name, _, value = line.partition(": ")
                    fields[name] = value
                elif "data" in fields:
                    yield Event(
                        id=fields["id"],
                        kind=EventKind(fields["event"]),
                        data=json.loads(fields["data"]),
                    )
                    fields = {}

    def upload(
        self, session_id: str, content: bytes | Path, path: str | None = None
    ) -> dict[str, Any]:
        """Put a file (bytes, or a local file) into the session's sandbox at `path` (by default
        the local file's name); its description as the sandbox has it."""
        if isinstance(content, Path):
            data, target = content.read_bytes(), path or content.name
        else:
            data, target = content, path
        if not target:
            raise ValueError("name the file in the sandbox: path=...")
        resp = self.http.post(
            f"/v1/sessions/{session_id}/files",
            files={"file": (Path(target).name, data)},
            data={"path": target},
            timeout=None,  # the gateway bounds the wait (TASKYARD_FILES_TIMEOUT_S)
        )
        resp.raise_for_status()
        return resp.json()

    def files(self, session_id: str) -> list[dict[str, Any]]:
        """The files in the session's working directory."""
        resp = self.http.get(f"/v1/sessions/{session_id}/files", timeout=None)
        resp.raise_for_status()
        return resp.json()["files"]

    def download(self, session_id: str, path: str) -> bytes:
        """A file of the session's working directory."""
        resp = self.http.get(f"/v1/sessions/{session_id}/files/{path}", timeout=None)
        resp.raise_for_status()
        return resp.content

    def artifacts(self, task_id: str) -> list[dict[str, Any]]:
        """What the task's tools made (figures, tables), each with its `url`."""
        resp = self.http.get(f"/v1/tasks/{task_id}/artifacts")
        resp.raise_for_status()
        return resp.json()["artifacts"]

    def save_artifact(self, url: str, folder: Path) -> Path:
        """Download an artifact (its `url`, from `artifacts` or an `artifact` event) into
        `folder` under its own name; the file's path."""
        resp = self.http.get(url)
        resp.raise_for_status()
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / Path(url).name
        target.write_bytes(resp.content)
        return target

    def close(self) -> None:
        self.http.close()
