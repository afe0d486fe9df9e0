"""Standard Webhooks' signatures: the standard's own test vector, and what `verify` refuses."""

from __future__ import annotations

import base64
import time

import pytest

from taskyard.client.webhooks import InvalidSignature, verify
from taskyard.plumbing.webhook_signatures import sign


def test_signatures_match_the_standard_webhooks_test_vector() -> None:
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    body = b'{"test": 2432232314}'
    signature = sign(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body)
    assert signature == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_verify_refuses_a_wrong_signature_an_old_timestamp_and_missing_headers() -> None:
    secret = "whsec_" + base64.b64encode(b"k" * 32).decode()
    now = int(time.time())
    headers = {"webhook-id": "1-0", "webhook-timestamp": str(now),
               "webhook-signature": sign(secret, "1-0", now, b"{}")}  # fmt: skip
    verify(secret, headers, b"{}")
    with pytest.raises(InvalidSignature, match="signature"):
        verify(secret, headers, b'{"changed": 1}')
    old = {**headers, "webhook-timestamp": str(now - 3600),
           "webhook-signature": sign(secret, "1-0", now - 3600, b"{}")}  # fmt: skip
    with pytest.raises(InvalidSignature, match="timestamp"):
        verify(secret, old, b"{}")
    with pytest.raises(InvalidSignature, match="header"):
        verify(secret, {"webhook-id": "1-0"}, b"{}")
