"""A task's webhook and its deliveries as the API shows them; the tenant's signing secret."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from taskyard.agentkit.spec import WebhookSpec
from taskyard.runtime.task import TaskStatus

__all__ = ["WebhookDelivery", "WebhookPublic", "WebhookSecret"]


class WebhookPublic(BaseModel):
    """A task's webhook as the API shows it: the headers it asked to send (an A2A push
    config's token and authorization: credentials of the receiver's) are named, not repeated."""

    url: str
    events: list[TaskStatus]
    format: Literal["standard", "a2a"]
    id: str | None = Field(description="The subscriber's name for it (A2A's push config id).")
    sends: list[str] = Field(description="The headers of its own each delivery carries.")

    @classmethod
    def of(cls, spec: WebhookSpec | None) -> WebhookPublic | None:
        if spec is None:
            return None
        asked = {"authorization": spec.authorization, "x-a2a-notification-token": spec.token}
        sends = [name for name, value in asked.items() if value is not None]
        events = [TaskStatus(event) for event in spec.events]
        return cls(url=spec.url, events=events, format=spec.format, id=spec.id, sends=sends)


class WebhookDelivery(BaseModel):
    """One state change told (or being told) to the task's webhook."""

    event_id: str = Field(description="Also the delivery's `webhook-id` header.")
    type: str
    state: Literal["delivered", "retrying", "failed", "refused"]
    attempts: int
    status_code: int | None
    error: str | None
    at: float


class WebhookSecret(BaseModel):
    """`GET /v1/webhooks/secret`: what the tenant's deliveries are signed with."""

    secret: str = Field(description='"whsec_" + base64 key, as Standard Webhooks libraries take.')
