"""A2A push notification configs as taskyard webhooks.

A config is the task's webhook subscription in A2A's format (`taskyard.runtime.webhooks`): the same
signed, retried, in-order deliveries, with A2A's body and the `Authorization` and
`X-A2A-Notification-Token` headers the config asks for. A task has one webhook, so it has at
most one config: setting another replaces it. Its id is the client's, or the task's id."""

from __future__ import annotations

from typing import Any

from a2a.types import AuthenticationInfo, TaskPushNotificationConfig

from taskyard.agentkit.spec import WebhookSpec
from taskyard.runtime.a2a_terms import A2A_PUSH_EVENTS

__all__ = ["config_of", "is_config", "webhook_of"]


def webhook_of(config: TaskPushNotificationConfig) -> dict[str, Any]:
    """The webhook subscription a config asks for, to validate as a `WebhookSpec`."""
    auth = config.authentication
    authorization = (
        f"{auth.scheme} {auth.credentials}" if auth.scheme and auth.credentials else None
    )
    return {
        "url": config.url, "events": A2A_PUSH_EVENTS, "format": "a2a",
        "id": config.id or None, "token": config.token or None,
        "authorization": authorization,
    }  # fmt: skip


def is_config(task_id: str, spec: WebhookSpec | None, config_id: str = "") -> bool:
    """Whether the task's webhook is an A2A config (the one named, if `config_id`)."""
    if spec is None or spec.format != "a2a":
        return False
    return not config_id or (spec.id or task_id) == config_id


def config_of(task_id: str, spec: WebhookSpec) -> TaskPushNotificationConfig:
    """The A2A config a webhook subscription holds."""
    scheme, _, credentials = (spec.authorization or "").partition(" ")
    auth = AuthenticationInfo(scheme=scheme, credentials=credentials) if scheme else None
    return TaskPushNotificationConfig(id=spec.id or task_id, task_id=task_id, url=spec.url,
                                      token=spec.token or "", authentication=auth)  # fmt: skip
