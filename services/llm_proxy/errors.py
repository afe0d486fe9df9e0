"""The proxy's error tree, its one root `ProxyError`; each error knows its HTTP status and
OpenAI-style JSON body.

ProxyError
├── BadRequest          400 invalid_request_error (malformed JSON, missing fields)
│   └── ContextTooLong  400 the upstream refused the prompt's length (triggers fallback)
├── Unauthorized        401 missing or unknown API key; a forged or expired tenant token
├── Forbidden           403 a credential used for another tenant or task
├── NotFound            404 unknown path
├── ModelNotFound       404 no replica serves the model
├── BodyTooLarge        413 request body past the limit
├── RateLimited         429 a key's request or token budget is spent (Retry-After)
├── Overloaded          429/503 every replica is at its bound and the queue is full or slow
├── NoReplica           503 no healthy replica for the model (and its fallbacks)
├── UpstreamFailed      502 the replicas kept failing after the retries
└── UpstreamError       one exchange with a replica failed (retried; the client sees it only
    │                   through the errors above, or as an error event mid-stream)
    ├── ConnectFailed   refused, or not accepted in time
    ├── UpstreamTimeout silent for longer than the read timeout
    └── UpstreamClosed  closed (or aborted) before the answer was complete
"""

from __future__ import annotations

from taskyard.errors import TaskyardError
from taskyard.http1.openai_errors import error_body

__all__ = [
    "BadRequest",
    "BodyTooLarge",
    "ConnectFailed",
    "ContextTooLong",
    "Forbidden",
    "ModelNotFound",
    "NoReplica",
    "NotFound",
    "Overloaded",
    "ProxyError",
    "RateLimited",
    "Unauthorized",
    "UpstreamClosed",
    "UpstreamError",
    "UpstreamFailed",
    "UpstreamTimeout",
]


class ProxyError(TaskyardError):
    """The proxy's root error: one the client sees as an OpenAI-style JSON body with `status`."""

    status = 500
    type = "server_error"
    code: str | None = None

    def __init__(
        self, message: str, *, retry_after: float | None = None, code: str | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after = retry_after
        if code is not None:
            self.code = code  # a finer reason than the class's (e.g. token_expired)

    def body(self) -> bytes:
        """The OpenAI error JSON."""
        return error_body(self.message, self.type, self.code)

    def headers(self) -> list[tuple[bytes, bytes]]:
        """Response headers: JSON, plus Retry-After when the client should come back later."""
        headers = [(b"content-type", b"application/json")]
        if self.retry_after is not None:
            headers.append((b"retry-after", str(max(1, round(self.retry_after))).encode()))
        return headers


class BadRequest(ProxyError):
    status = 400
    type = "invalid_request_error"
    code = "bad_request"


class ContextTooLong(BadRequest):
    code = "context_length_exceeded"


class Unauthorized(ProxyError):
    status = 401
    type = "authentication_error"
    code = "invalid_api_key"


class Forbidden(ProxyError):
    status = 403
    type = "permission_error"
    code = "forbidden"


class NotFound(ProxyError):
    status = 404
    type = "invalid_request_error"
    code = "not_found"


class ModelNotFound(ProxyError):
    status = 404
    type = "invalid_request_error"
    code = "model_not_found"


class BodyTooLarge(ProxyError):
    status = 413
    type = "invalid_request_error"
    code = "request_too_large"


class RateLimited(ProxyError):
    status = 429
    type = "rate_limit_error"
    code = "rate_limit_exceeded"


class Overloaded(ProxyError):
    type = "overloaded_error"
    code = "overloaded"

    def __init__(self, message: str, *, status: int, retry_after: float) -> None:
        super().__init__(message, retry_after=retry_after)
        self.status = status


class NoReplica(ProxyError):
    status = 503
    type = "service_unavailable"
    code = "no_healthy_replica"


class UpstreamFailed(ProxyError):
    status = 502
    type = "upstream_error"
    code = "upstream_failed"


class UpstreamError(ProxyError):
    """The exchange with a replica failed; `answered` says if any response byte had arrived,
    `reused` if the connection had served an exchange before (stale keep-alive)."""

    status = 502
    type = "upstream_error"
    code = "upstream_failed"

    def __init__(self, message: str, *, answered: bool = False, reused: bool = False) -> None:
        super().__init__(message)
        self.answered = answered
        self.reused = reused


class ConnectFailed(UpstreamError):
    """The replica refused or did not accept the connection in time."""


class UpstreamTimeout(UpstreamError):
    """The replica went silent for longer than the read timeout."""


class UpstreamClosed(UpstreamError):
    """The replica closed the connection before the response was complete."""
