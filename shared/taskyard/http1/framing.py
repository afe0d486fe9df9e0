"""The bytes of a response: status line and headers, and chunked transfer framing."""

from __future__ import annotations

from http import HTTPStatus

__all__ = ["Headers", "chunk", "head"]

Headers = list[tuple[bytes, bytes]]

_REASONS = {status.value: status.phrase.encode() for status in HTTPStatus}
_LAST_CHUNK = b"0\r\n\r\n"


def head(status: int, headers: Headers, length: int | None) -> bytes:
    """The response head: fixed `length`, or chunked when None."""
    lines = [b"HTTP/1.1 %d %s\r\n" % (status, _REASONS.get(status, b"Unknown"))]
    lines.extend(b"%s: %s\r\n" % pair for pair in headers)
    if length is None:
        lines.append(b"transfer-encoding: chunked\r\n\r\n")
    else:
        lines.append(b"content-length: %d\r\n\r\n" % length)
    return b"".join(lines)


def chunk(data: bytes, last: bool) -> bytes:
    """`data` as one chunk (none if empty), followed by the last chunk when `last`."""
    framed = b"%x\r\n%s\r\n" % (len(data), data) if data else b""
    return framed + _LAST_CHUNK if last else framed
