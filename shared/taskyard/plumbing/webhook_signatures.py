"""Standard Webhooks' signatures: ``webhook-signature`` is ``v1,`` + base64 HMAC-SHA256 of
``id.timestamp.body`` under the tenant's ``whsec_`` secret.

The standard library only, so a webhook receiver checks a delivery with the client install
alone (`taskyard.client.webhooks`), and the deliverer signs with the same code.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from collections.abc import Mapping

from taskyard.errors import TaskyardError

__all__ = ["InvalidSignature", "sign", "verify"]


def sign(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """Standard Webhooks' signature header value for a delivery."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = hmac.new(key, f"{message_id}.{timestamp}.".encode() + body, hashlib.sha256)
    return "v1," + base64.b64encode(signed.digest()).decode()


class InvalidSignature(TaskyardError, ValueError):
    """A delivery whose signature or timestamp does not check out."""


def verify(secret: str, headers: Mapping[str, str], body: bytes, tolerance_s: float = 300) -> None:
    """Check a delivery as a receiver should (headers by lower-case name): its signature,
    and a timestamp within `tolerance_s` of now (an old delivery replayed is refused)."""
    try:
        message_id, stamp = headers["webhook-id"], int(headers["webhook-timestamp"])
        offered = headers["webhook-signature"].split()
    except (KeyError, ValueError) as exc:
        raise InvalidSignature(f"missing or malformed webhook header: {exc}") from exc
    if abs(time.time() - stamp) > tolerance_s:
        raise InvalidSignature("webhook-timestamp is too far from now")
    expected = sign(secret, message_id, stamp, body)
    if not any(hmac.compare_digest(expected, candidate) for candidate in offered):
        raise InvalidSignature("no webhook-signature matches")
