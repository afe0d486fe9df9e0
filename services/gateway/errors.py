"""The gateway's one error shape, FastAPI's ``{"detail": ...}``: a message, or for 422 the list
of what failed. The models document it; `responses` declares each route's errors from them.

The gateway's own errors derive from `GatewayError` (itself a `taskyard.errors.TaskyardError`);
those that are HTTP answers are also Starlette `HTTPException`s, so `http_error` renders them."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from taskyard.errors import TaskyardError
from taskyard.runtime.forks import ForkRefused
from taskyard.runtime.store import NotReplicated
from taskyard.runtime.submission import SubmissionRefused

__all__ = [
    "ErrorBody",
    "GatewayError",
    "Issue",
    "ValidationErrorBody",
    "artifacts_unavailable",
    "fork_refused",
    "http_error",
    "issue",
    "not_replicated",
    "refused",
    "responses",
    "server_error",
    "store_unavailable",
    "validation_error",
]

log = logging.getLogger("taskyard.gateway")

_ECHO_CHARS = 100  # a 422 shows at most this much of what was sent


class GatewayError(TaskyardError):
    """Base of the gateway's errors."""


class ErrorBody(BaseModel):
    """An error: what went wrong, in a sentence."""

    detail: str


class Issue(BaseModel):
    """One thing that failed validation, where (``loc``) and why."""

    loc: list[str | int]
    msg: str
    type: str
    input: Any = None  # the value sent, cut to a short prefix; absent for objects and arrays
    ctx: dict[str, Any] | None = None


class ValidationErrorBody(BaseModel):
    """A request that is not valid: every problem found (422)."""

    detail: list[Issue]


_WHY = {
    400: "A header is not valid.",
    401: "Missing or unknown API key (`Authorization: Bearer <key>`).",
    404: "No such task for this API key.",
    409: "The task or its session is not in a state that allows this.",
    413: "The request body is over the gateway's size limit.",
    422: "The request is not valid: what failed, where, and why.",
    503: "Redis, which the gateway needs, does not answer.",
    504: "No tool worker answered in time (TASKYARD_FILES_TIMEOUT_S).",
}


def responses(*codes: int, why: Mapping[int, str] | None = None) -> dict[int | str, dict[str, Any]]:
    """The `responses=` of a route that may answer these error codes (and 503: every route
    that declares its errors reads Redis); `why` words a code for this route where the usual
    description does not fit."""
    return {
        code: {
            "model": ValidationErrorBody if code == 422 else ErrorBody,
            "description": (why or {}).get(code, _WHY[code]),
        }
        for code in sorted({*codes, 503})
    }


def issue(loc: Sequence[str | int], msg: str) -> dict[str, Any]:
    """A 422 detail item for a check made after validation (unknown tool, reused key)."""
    return {"loc": loc, "msg": msg, "type": "value_error"}


def refused(exc: SubmissionRefused, *within: str) -> HTTPException:
    """A 422 for a submission this deployment refuses, at its field (inside the body's
    `within`, for a task nested in another request)."""
    return HTTPException(422, detail=[issue(["body", *within, *exc.loc], exc.reason)])


_FORK_REFUSED = {"missing": 404, "exists": 409, "busy": 409, "unavailable": 503, "timeout": 504}


def fork_refused(exc: ForkRefused) -> HTTPException:
    """A session fork not made: the source unknown 404, in use or the new id taken 409, an
    interpreter the backend cannot fork 503, its tool worker silent 504."""
    return HTTPException(_FORK_REFUSED[exc.why], detail=str(exc))


async def validation_error(request: Request, exc: Exception) -> JSONResponse:
    """422 with every problem; values sent come back as a short prefix at most, so a large
    body is never echoed."""
    assert isinstance(exc, RequestValidationError)
    return JSONResponse({"detail": [_issue(error) for error in exc.errors()]}, status_code=422)


async def http_error(request: Request, exc: Exception) -> Response:
    """Starlette's HTTP errors in the one shape. A 405's `Allow` names every method of the
    path: Starlette lists only the first route that matched it, and a path such as
    /v1/tasks has one route per method."""
    assert isinstance(exc, StarletteHTTPException)
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        headers["Allow"] = ", ".join(_methods_of(request))
    if exc.status_code == 204 or exc.status_code < 200:
        return Response(status_code=exc.status_code, headers=headers)
    return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=headers)


_METHODS = ("DELETE", "GET", "HEAD", "PATCH", "POST", "PUT")


def _methods_of(request: Request) -> list[str]:
    """Every method some route answers at the request's path."""
    return [m for m in _METHODS if _routed(request, m)]


def _routed(request: Request, method: str) -> bool:
    scope = {**request.scope, "method": method}
    return any(route.matches(scope)[0] == Match.FULL for route in request.app.router.routes)


async def store_unavailable(request: Request, exc: Exception) -> JSONResponse:
    """503 with Retry-After while Redis does not answer (restarting, loading its data, out of
    reach past the client's retries): nothing was done, so the same request may be sent
    again (with its Idempotency-Key, a submission is never made twice)."""
    log.warning("%s %s: Redis unavailable: %s", request.method, request.url.path, exc)
    detail = "the task store (Redis) does not answer; retry shortly"
    return JSONResponse({"detail": detail}, status_code=503, headers={"Retry-After": "1"})


async def not_replicated(request: Request, exc: Exception) -> JSONResponse:
    """503 with Retry-After when too few replicas confirmed a task in time: a 202 promises
    that a failover loses no accepted task, and this one could be lost. It is stored on the
    primary, so it may run; sent again with its Idempotency-Key it is never made twice."""
    assert isinstance(exc, NotReplicated)
    log.warning("%s %s: not replicated: %s", request.method, request.url.path, exc)
    detail = (
        f"no replica confirmed the task within {exc.timeout_ms} ms, so it is not accepted "
        "(it may still run); send it again with the same Idempotency-Key"
    )
    return JSONResponse({"detail": detail}, status_code=503, headers={"Retry-After": "1"})


async def artifacts_unavailable(request: Request, exc: Exception) -> JSONResponse:
    """503 with Retry-After while the artifact store (Redis or S3) fails: only a read."""
    log.warning("%s %s: artifact store unavailable: %s", request.method, request.url.path, exc)
    detail = "the artifact store does not answer; retry shortly"
    return JSONResponse({"detail": detail}, status_code=503, headers={"Retry-After": "1"})


async def server_error(request: Request, exc: Exception) -> JSONResponse:
    """500 in the same shape; the exception itself goes to the log."""
    log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
    return JSONResponse({"detail": "internal error"}, status_code=500)


def _issue(error: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "loc": [_short(part) for part in error["loc"]],  # object keys are the sender's text
        "msg": _short(error["msg"]),
        "type": error["type"],
    }
    if "input" in error and isinstance(error["input"], str | bytes | int | float | None):
        out["input"] = _short(error["input"])
    if error.get("ctx"):
        out["ctx"] = {key: _short(value) for key, value in error["ctx"].items()}
    return out


def _short(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, bytes):
        value = value[: _ECHO_CHARS * 4].decode(errors="replace")
    text = value if isinstance(value, str) else str(value)
    return text if len(text) <= _ECHO_CHARS else text[:_ECHO_CHARS] + "…"
