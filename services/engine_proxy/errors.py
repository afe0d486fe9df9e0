"""The proxy's errors.

    EngineProxyError
    ├── Refused          a request the proxy answers itself: not allowed, malformed, unknown caller
    └── EngineUnreachable  the engine's socket cannot be opened, or it broke off mid-answer

A refusal answers the way the engine's own errors do, ``{"message": "..."}``, so the Docker SDK
raises an `APIError` whose explanation is the proxy's reason.
"""

from __future__ import annotations

import orjson

__all__ = ["EngineProxyError", "EngineUnreachable", "Refused", "error_body"]

_SAID = "refused by the engine proxy: "


class EngineProxyError(Exception):
    """Any failure of the proxy."""


class Refused(EngineProxyError):
    """A request answered by the proxy with `status` and `reason`, never forwarded."""

    def __init__(self, reason: str, status: int = 403, from_engine: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status
        self.from_engine = from_engine  # the engine's own answer, passed on as it said it

    def body(self) -> bytes:
        return error_body(self.reason if self.from_engine else _SAID + self.reason)


class EngineUnreachable(EngineProxyError):
    """The engine did not answer: its socket, or a connection that broke off."""


def error_body(message: str) -> bytes:
    """An error answer's body, as the engine writes its own."""
    return orjson.dumps({"message": message})
