"""What a webhook receiver gets for one state change: the body, in Standard Webhooks' shape or
as A2A's push notification, and the headers, the signed ``webhook-*`` ones (``webhook-id`` is
the state change's event id, stable across retries, so receivers drop duplicates) and those
the subscription asked for."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import orjson

from taskyard.agentkit.spec import WebhookSpec
from taskyard.plumbing.webhook_signatures import sign
from taskyard.runtime.a2a_terms import A2A_STATES, event_time
from taskyard.runtime.task import TaskRecord, TaskStatus

__all__ = ["Delivery", "delivery"]


@dataclass(frozen=True, slots=True)
class Delivery:
    """One POST to the receiver."""

    body: bytes
    headers: dict[str, str]


def delivery(
    record: TaskRecord, spec: WebhookSpec, event_id: str, data: dict[str, Any], secret: str
) -> Delivery:
    """The request telling `spec`'s receiver of the task's state change `event_id` (its
    event's `data`), signed now with the tenant's `secret`."""
    body = orjson.dumps(_BODIES[spec.format](record, event_id, data))
    now = int(time.time())
    signature = sign(secret, event_id, now, body)
    headers = {"content-type": "application/json", "webhook-id": event_id,
               "webhook-timestamp": str(now), "webhook-signature": signature,
               **_asked_headers(spec)}  # fmt: skip
    return Delivery(body, headers)


def _standard_body(record: TaskRecord, event_id: str, data: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": f"task.{data['status']}",
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "data": {"task_id": record.id, "session_id": record.session_id, **data},
    }


def _a2a_body(record: TaskRecord, event_id: str, data: dict[str, Any]) -> dict[str, Any]:
    """A2A's push notification: a `StreamResponse` holding the status update, in the JSON of
    the protocol's protobuf messages; a reason the task gives rides as the status message."""
    at = event_time(event_id).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    status: dict[str, Any] = {"state": A2A_STATES[TaskStatus(data["status"])], "timestamp": at}
    if reason := data.get("error") or data.get("reason"):
        status["message"] = {
            "messageId": event_id, "contextId": record.session_id, "taskId": record.id,
            "role": "ROLE_AGENT", "parts": [{"text": str(reason)}],
        }  # fmt: skip
    update = {"taskId": record.id, "contextId": record.session_id, "status": status}
    return {"statusUpdate": update}


_BODIES = {"standard": _standard_body, "a2a": _a2a_body}


def _asked_headers(spec: WebhookSpec) -> dict[str, str]:
    """The headers the subscriber asked for (A2A's `authentication` and `token`)."""
    asked = {"authorization": spec.authorization, "x-a2a-notification-token": spec.token}
    return {name: value for name, value in asked.items() if value is not None}
