"""What the gateway checks before it reads a request's body: the API key (401) and the body's
size (413). A raw ASGI middleware, so a body is never read, let alone parsed, for a caller
without a key, and never read past the limit. Routes that take large bodies (file uploads)
have a limit of their own (`LargeBodies`); every other route keeps the small one."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.gateway.errors import GatewayError

__all__ = ["AUTH_PATHS", "AUTH_PREFIX", "Admission", "BodyTooLarge", "LargeBodies"]

AUTH_PREFIX = "/v1/"  # every route under it needs a key; health and docs do not
AUTH_PATHS = (AUTH_PREFIX, "/mcp")  # and MCP's endpoint (`resources/mcp/`)
_UNAUTHORIZED = "missing or invalid API key (Authorization: Bearer <key>)"


class BodyTooLarge(GatewayError, HTTPException):
    """413: the body passed the gateway's limit (or the route's, which `detail` names)."""

    def __init__(self, limit: int, detail: str | None = None) -> None:
        super().__init__(413, detail=detail or f"request body over {limit} bytes")
        self.limit = limit


@dataclass(frozen=True)
class LargeBodies:
    """Requests of `method` to paths matching `path` may send up to `limit` bytes; past it the
    413 says `detail`."""

    method: str
    path: re.Pattern[str]
    limit: int
    detail: str


class Admission:
    """Puts the caller's tenant in the request's state (``request.state.tenant``) or answers
    401; answers 413 for a body over `max_body_bytes` (or a `large` route's own limit), by its
    Content-Length or, without one, while it arrives."""

    def __init__(
        self,
        app: ASGIApp,
        tenants: dict[str, str],
        max_body_bytes: int,
        large: Sequence[LargeBodies] = (),
    ) -> None:
        self.app = app
        self.tenants = tenants  # API key to tenant
        self.max_body_bytes = max_body_bytes
        self.large = tuple(large)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        authorization, length = _headers(scope)
        if scope["path"].startswith(AUTH_PATHS):
            tenant = self.tenants.get(_bearer(authorization))
            if tenant is None:
                reply = _error(401, _UNAUTHORIZED, {"WWW-Authenticate": "Bearer"})
                return await reply(scope, receive, send)
            scope.setdefault("state", {})["tenant"] = tenant
        too_large = self._too_large(scope)
        if length is not None and length > too_large.limit:
            return await _error(413, too_large.detail)(scope, receive, send)
        await self.app(scope, _limited(receive, too_large), send)

    def _too_large(self, scope: Scope) -> BodyTooLarge:
        """The 413 this request gets past its limit (`.limit`)."""
        for route in self.large:
            if scope["method"] == route.method and route.path.fullmatch(scope["path"]):
                return BodyTooLarge(route.limit, route.detail)
        return BodyTooLarge(self.max_body_bytes)


def _headers(scope: Scope) -> tuple[bytes, int | None]:
    """The Authorization header and the Content-Length (None if absent or not a number)."""
    authorization, length = b"", None
    for name, value in scope["headers"]:
        if name == b"authorization" and not authorization:
            authorization = value
        elif name == b"content-length" and value.isdigit():
            length = int(value)
    return authorization, length


def _bearer(authorization: bytes) -> str:
    scheme, _, key = authorization.partition(b" ")
    return key.strip().decode("latin-1") if scheme.lower() == b"bearer" else ""


def _error(status: int, detail: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=status, headers=headers)


def _limited(receive: Receive, too_large: BodyTooLarge) -> Receive:
    """`receive` that raises `too_large` once the body passes its limit; the app's exception
    handler answers it (the route is reading the body, nothing was sent yet)."""
    received = 0
    limit = too_large.limit

    async def receive_limited() -> Message:
        nonlocal received
        message = await receive()
        received += len(message.get("body", b""))
        if received > limit:
            raise too_large
        return message

    return receive_limited
