"""The client's errors, one class per reason, each with the server's own words in `reason`;
and the translation of an HTTP answer (or of no answer) into one of them.

    TaskyardError (taskyard.errors)
    └── ClientError
        ├── Unauthorized        401: missing or unknown API key
        ├── NotFound            404: no such task (or session, call, file) for this key
        ├── InvalidRequest      400, 409, 413, 422: the request cannot be taken as it is
        ├── ServerError         5xx (and any other answer the gateway should not give)
        └── GatewayUnreachable  no answer at all: refused, timed out, dropped
"""

from __future__ import annotations

import httpx

from taskyard.errors import TaskyardError

__all__ = [
    "ClientError",
    "GatewayUnreachable",
    "InvalidRequest",
    "NotFound",
    "ServerError",
    "TaskyardError",
    "Unauthorized",
    "raise_for",
    "unreachable",
]


class ClientError(TaskyardError):
    """The gateway refused the request, or could not be reached; `reason` says why."""

    def __init__(self, reason: str, status: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status


class Unauthorized(ClientError):
    """401: the API key is missing or unknown."""


class NotFound(ClientError):
    """404: no such task (or session, held call, file, artifact) for this API key."""


class InvalidRequest(ClientError):
    """400, 409, 413, 422: the request is not valid, or not in the task's current state."""


class ServerError(ClientError):
    """A 5xx answer, or another the gateway does not give by design."""


class GatewayUnreachable(ClientError):
    """No answer: the connection was refused, timed out or dropped."""


_BY_STATUS: dict[int, type[ClientError]] = {
    401: Unauthorized,
    404: NotFound,
    400: InvalidRequest,
    409: InvalidRequest,
    413: InvalidRequest,
    422: InvalidRequest,
}


def raise_for(response: httpx.Response) -> None:
    """Raise the error an answer (its body read) means, if it is one."""
    if response.is_success:
        return
    kind = _BY_STATUS.get(response.status_code, ServerError)
    raise kind(_reason(response), response.status_code)


def _reason(response: httpx.Response) -> str:
    """The server's reason: its `detail` sentence, or each invalid field and why."""
    try:
        detail = response.json()["detail"]
    except (ValueError, KeyError, TypeError):
        return f"HTTP {response.status_code}: {response.text[:200] or response.reason_phrase}"
    if isinstance(detail, list):
        return "; ".join(f"{'.'.join(map(str, i['loc']))}: {i['msg']}" for i in detail)
    return str(detail)


def unreachable(exc: httpx.TransportError) -> GatewayUnreachable:
    """The error for a request that got no answer, naming the gateway it was sent to."""
    where = exc.request.url.copy_with(path="/", query=None) if exc.request else "the gateway"
    return GatewayUnreachable(f"cannot reach the gateway at {where}: {exc or type(exc).__name__}")
