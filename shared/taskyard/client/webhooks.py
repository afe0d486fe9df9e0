"""For webhook receivers: check that a delivery comes from the gateway, signed with the
tenant's secret (`TaskyardClient.webhook_secret`), and is not an old one replayed.

    verify(secret, {name.lower(): value for name, value in headers.items()}, body)

raises `InvalidSignature` (also a `ValueError`) for a delivery that does not check out. It
needs nothing past the client install: no Redis, no Celery.
"""

from taskyard.plumbing.webhook_signatures import InvalidSignature, verify

__all__ = ["InvalidSignature", "verify"]
