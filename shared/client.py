"""The Python client for the gateway: submit a task, read it, follow its events live."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
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
        webhook: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"input": text}
        if session_id:
            body["session_id"] = session_id
        if agent:
            body["agent"] = agent
        if webhook:
            body["webhook"] = webhook
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

    def approve(
        self, task_id: str, call_id: str, arguments: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Let a call held for approval run (with `arguments` instead of the model's)."""
        body: dict[str, Any] = {"decision": "approve"}
        if arguments is not None:
            body["arguments"] = arguments
        return self._decide(task_id, call_id, body)

    def deny(self, task_id: str, call_id: str, reason: str | None = None) -> dict[str, Any]:
        """Refuse a call held for approval; the model reads the reason as its result."""
        return self._decide(task_id, call_id, {"decision": "deny", "reason": reason})

    def _decide(self, task_id: str, call_id: str, body: dict[str, Any]) -> dict[str, Any]:
        resp = self.http.post(f"/v1/tasks/{task_id}/approvals/{call_id}", json=body)
        resp.raise_for_status()
        return resp.json()

    def webhook_secret(self) -> str:
        """What this tenant's webhook deliveries are signed with (`shared.webhooks.verify`)."""
        resp = self.http.get("/v1/webhooks/secret")
        resp.raise_for_status()
        return resp.json()["secret"]

    def close(self) -> None:
        self.http.close()
