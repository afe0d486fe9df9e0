"""One parsed HTTP/1.1 request."""

from __future__ import annotations

__all__ = ["Request"]


class Request:
    """Method, path and query (split at the first "?"), lower-case header names, the body.

    `body_too_large`: the body passed the server's limit, so `body` is empty and the handler
    should answer 413.
    """

    __slots__ = ("body", "body_too_large", "headers", "keep_alive", "method", "path", "query")

    def __init__(
        self,
        method: bytes,
        path: bytes,
        query: bytes,
        headers: dict[bytes, bytes],
        body: bytes,
        keep_alive: bool = True,
        body_too_large: bool = False,
    ) -> None:
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        self.keep_alive = keep_alive
        self.body_too_large = body_too_large
