"""Webhooks: a task may ask to be told when it reaches some states (``"webhook": {"url": ...,
"events": ["succeeded", "failed"]}``).

Deliveries follow Standard Webhooks, signed under the tenant's secret
(`taskyard.plumbing.webhook_signatures`, which receivers reach as `taskyard.client.webhooks`).
A subscription may ask for A2A's body instead (``"format": "a2a"``); the gateway's A2A push
configs are such subscriptions, set on a running task. Delivery jobs run on Celery's
`webhooks` queue, pushed by the store's scripts in the same write as the state change (a slow
receiver holds no agent step). Addresses that are loopback, link-local or private are refused
unless ``TASKYARD_WEBHOOK_ALLOW_PRIVATE`` (the same request guard as the web browser's).

One module per part: `subscriptions.py` (who is told of what), `payloads.py` (what a
receiver gets), `ledger.py` (what Redis keeps of the deliveries), `tenant_secrets.py` (the
signing secrets), `deliverer.py` (the delivery job).
"""

from taskyard.runtime.webhooks.deliverer import Deliverer, Outcome
from taskyard.runtime.webhooks.ledger import deliveries
from taskyard.runtime.webhooks.subscriptions import attach, detach, refusal, subscription
from taskyard.runtime.webhooks.tenant_secrets import tenant_secret

__all__ = [
    "Deliverer",
    "Outcome",
    "attach",
    "deliveries",
    "detach",
    "refusal",
    "subscription",
    "tenant_secret",
]
