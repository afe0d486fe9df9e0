"""What the gateway checks before it reads a request's body: the API key (401) and the body's
size (413). A raw ASGI middleware, so a body is never read, let alone parsed, for a caller
without a key, and never read past the limit."""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["AUTH_PREFIX", "BodyTooLarge", "Guard"]

AUTH_PREFIX = "/v1/"  # every route under it needs a key; health and docs do not
_UNAUTHORIZED = "missing or invalid API key (Authorization: Bearer <key>)"


class BodyTooLarge(HTTPException):
    """413: the body passed the gateway's limit."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, detail=f"request body over {limit} bytes")


class Guard:
    """Puts the caller's tenant in the request's state (``request.state.tenant``) or answers
    401; answers 413 for a body over `max_body_bytes`, by its Content-Length or, without one,
    while it arrives."""

    def __init__(self, app: ASGIApp, tenants: dict[str, str], max_body_bytes: int) -> None:
        self.app = app
        self.tenants = tenants  # API key to tenant
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        authorization, length = _headers(scope)
        if scope["path"].startswith(AUTH_PREFIX):
            tenant = self.tenants.get(_bearer(authorization))
            if tenant is None:
                reply = _error(401, _UNAUTHORIZED, {"WWW-Authenticate": "Bearer"})
                return await reply(scope, receive, send)
            scope.setdefault("state", {})["tenant"] = tenant
        if length is not None and length > self.max_body_bytes:
            reply = _error(413, BodyTooLarge(self.max_body_bytes).detail)
            return await reply(scope, receive, send)
        await self.app(scope, _limited(receive, self.max_body_bytes), send)


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


def _limited(receive: Receive, limit: int) -> Receive:
    """`receive` that raises `BodyTooLarge` once the body passes `limit` bytes; the app's
    exception handler answers it (the route is reading the body, nothing was sent yet)."""
    received = 0

    async def receive_limited() -> dict:
        nonlocal received
        message = await receive()
        received += len(message.get("body", b""))
        if received > limit:
            raise BodyTooLarge(limit)
        return message

    return receive_limited
