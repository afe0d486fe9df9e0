"""The OpenAI error body, ``{"error": {"message", "type", "param", "code"}}``, built in one place.

The openai SDK reads `message` and `code` from it, on an error answer and in a server-sent event
alike; every server of ours (the proxy, the scripted model, test doubles) answers with it.
"""

from __future__ import annotations

import orjson

__all__ = ["error_body", "error_event"]


def error_body(
    message: str, kind: str, code: str | int | None = None, param: str | None = None
) -> bytes:
    """The JSON body of an error answer; `kind` is its `type` (``invalid_request_error``)."""
    error = {"message": message, "type": kind, "param": param, "code": code}
    return orjson.dumps({"error": error})


def error_event(message: str, kind: str, code: str | int | None = None) -> bytes:
    """The same error as one server-sent event, which the openai SDK raises as an `APIError`."""
    return b"data: " + error_body(message, kind, code) + b"\n\n"
