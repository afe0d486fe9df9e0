"""HTTP/1.1 on both sides of the proxy: requests read strictly, answers relayed as they come.

A request the proxy cannot read one way only is refused rather than guessed at: no chunked
bodies, no repeated or folded headers, no bytes outside printable ASCII in the head. The
proxy then writes the request it forwards itself (`render_request`), from what it checked, so
the engine never reads a request other than the one the proxy allowed.

An answer's body is relayed by its framing (a length, chunks, or until the connection ends: a
hijacked stream) without being decoded, except where the proxy must read it (`read_body`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from dataclasses import dataclass
from http import HTTPStatus
from typing import Literal

from services.engine_proxy.errors import EngineUnreachable, Refused

__all__ = [
    "MAX_HEAD",
    "AnswerHead",
    "Request",
    "read_answer_head",
    "read_body",
    "read_head",
    "read_request_body",
    "relay_answer",
    "render_answer",
    "render_request",
]

MAX_HEAD = 64 * 1024  # the stream reader's limit: a head past it is refused
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE"})
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_VALUE = re.compile(r"[\t\x20-\x7e]*")
_SINGLE = frozenset({"content-length", "transfer-encoding", "host", "connection", "upgrade"})
_PIECE = 64 * 1024

Framing = Literal["none", "length", "chunked", "until-close"]


@dataclass(frozen=True)
class Request:
    """A client's request: method, path and query (split at the first "?"), headers (names in
    lower case, each once), body."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes

    @property
    def keep_alive(self) -> bool:
        return self.headers.get("connection", "").lower() != "close"

    @property
    def has_body(self) -> bool:
        return "transfer-encoding" in self.headers or self.headers.get("content-length") not in (
            None,
            "0",
        )


@dataclass(frozen=True)
class AnswerHead:
    """The head of the engine's answer: its status, headers, and its bytes as sent."""

    status: int
    headers: dict[str, str]
    raw: bytes

    def framing(self, method: str) -> Framing:
        if method == "HEAD" or self.status in (204, 304) or 100 <= self.status < 200:
            return "until-close" if self.status == 101 else "none"
        if "chunked" in self.headers.get("transfer-encoding", "").lower():
            return "chunked"
        if "content-length" in self.headers:
            return "length"
        return "until-close"  # a raw stream (an exec started without an upgrade)

    @property
    def keep_alive(self) -> bool:
        return self.headers.get("connection", "").lower() != "close"


async def read_head(reader: asyncio.StreamReader) -> Request | None:
    """The next request's head (its body still unread: `read_request_body`), or None if the
    client closed between requests."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial.strip():
            return None
        raise Refused("the request ended inside its head", 400) from None
    except asyncio.LimitOverrunError:
        raise Refused("the request's head is too large", 431) from None
    method, target, headers = _parse_request_head(head)
    path, _, query = target.partition("?")
    return Request(method, path, query, headers, b"")


async def read_request_body(
    request: Request, reader: asyncio.StreamReader, max_body: int
) -> Request:
    """The request with its body read."""
    if "transfer-encoding" in request.headers:
        raise Refused("a request body must have a Content-Length (no chunks)", 411)
    length = _content_length(request.headers.get("content-length", "0"))
    if length > max_body:
        raise Refused(f"the request body is over {max_body} bytes", 413)
    try:
        body = await reader.readexactly(length)
    except asyncio.IncompleteReadError:
        raise Refused("the request ended inside its body", 400) from None
    return dataclasses.replace(request, body=body)


def _parse_request_head(head: bytes) -> tuple[str, str, dict[str, str]]:
    try:
        text = head.decode("ascii")
    except UnicodeDecodeError:
        raise Refused("the request's head is not ASCII", 400) from None
    line, *lines = text[:-4].split("\r\n")
    parts = line.split(" ")
    if len(parts) != 3 or parts[2] not in ("HTTP/1.1", "HTTP/1.0"):
        raise Refused("the request line is not METHOD TARGET HTTP/1.1", 400)
    method, target, _ = parts
    if method not in _METHODS:
        raise Refused(f"{method[:20]} is not a method the engine proxy passes", 405)
    if not target.startswith("/") or not _VALUE.fullmatch(target) or "#" in target:
        raise Refused("the request target is not a path", 400)
    return method, target, _parse_headers(lines)


def _parse_headers(lines: list[str]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for line in lines:
        name, sep, value = line.partition(":")
        if not (sep and _TOKEN.fullmatch(name) and _VALUE.fullmatch(value)):
            raise Refused("a request header is malformed (or folded)", 400)
        name = name.lower()
        if name in headers and name in _SINGLE:
            raise Refused(f"the {name} header is given twice", 400)
        headers[name] = value.strip()
    return headers


def _content_length(text: str) -> int:
    if not text.isdigit() or len(text) > 15:
        raise Refused("the Content-Length is not a number", 400)
    return int(text)


def render_request(method: str, target: str, headers: list[tuple[str, str]], body: bytes) -> bytes:
    """The bytes of a request with a fixed-length body."""
    lines = [f"{method} {target} HTTP/1.1", *(f"{n}: {v}" for n, v in headers)]
    if body or method in ("POST", "PUT"):
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii") + body


def render_answer(status: int, body: bytes, close: bool = False, head_only: bool = False) -> bytes:
    """The bytes of a JSON answer the proxy writes itself (`head_only`: to a HEAD request, which
    gets the length but not the body)."""
    lines = [
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}",
        "Content-Type: application/json",
        f"Content-Length: {len(body)}",
        *(["Connection: close"] if close else []),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii") + (b"" if head_only else body)


async def read_answer_head(reader: asyncio.StreamReader) -> AnswerHead:
    """The head of the engine's answer; `EngineUnreachable` if the connection ends first."""
    try:
        raw = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError) as exc:
        raise EngineUnreachable(f"the engine broke off before answering: {exc!r}") from exc
    line, *lines = raw[:-4].decode("latin-1").split("\r\n")
    try:
        status = int(line.split(" ", 2)[1])
    except (IndexError, ValueError):
        raise EngineUnreachable(f"the engine answered {line[:60]!r}") from None
    headers = {}
    for header in lines:
        name, _, value = header.partition(":")
        headers[name.strip().lower()] = value.strip()
    return AnswerHead(status, headers, raw)


async def relay_answer(
    head: AnswerHead, method: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    """Copy the answer, framed as the engine framed it (not one ending at a close); a small
    body goes out with the head, in one write."""
    framing = head.framing(method)
    size = int(head.headers["content-length"]) if framing == "length" else 0
    if size > _PIECE:  # a large body (a file read out of a sandbox): piece by piece
        writer.write(head.raw)
        await _copy(reader, writer, size)
        return
    try:
        writer.write(head.raw + await reader.readexactly(size))
    except asyncio.IncompleteReadError as exc:
        raise EngineUnreachable("the engine's answer broke off") from exc
    await writer.drain()
    if framing == "chunked":
        while size := await _copy_chunk_size(reader, writer):
            await _copy(reader, writer, size + 2)  # the chunk and its CRLF
        await _copy_trailers(reader, writer)


async def read_body(head: AnswerHead, method: str, reader: asyncio.StreamReader) -> bytes:
    """The answer's whole body, chunks joined (answers the proxy reads: small JSON)."""
    framing = head.framing(method)
    try:
        if framing == "length":
            return await reader.readexactly(int(head.headers["content-length"]))
        if framing == "until-close":
            return await reader.read()
        pieces = []
        if framing == "chunked":
            while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
                pieces.append((await reader.readexactly(size + 2))[:-2])
            while await reader.readuntil(b"\r\n") != b"\r\n":
                pass  # trailers
        return b"".join(pieces)
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
        raise EngineUnreachable(f"the engine's answer broke off: {exc!r}") from exc


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, size: int) -> None:
    while size > 0:
        piece = await reader.read(min(size, _PIECE))
        if not piece:
            raise EngineUnreachable("the engine's answer broke off")
        size -= len(piece)
        writer.write(piece)
        await writer.drain()


async def _copy_chunk_size(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> int:
    try:
        line = await reader.readuntil(b"\r\n")
        size = int(line.split(b";")[0], 16)
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
        raise EngineUnreachable(f"the engine's chunks broke off: {exc!r}") from exc
    writer.write(line)
    return size


async def _copy_trailers(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    line = b""
    while line != b"\r\n":
        try:
            line = await reader.readuntil(b"\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
            raise EngineUnreachable("the engine's chunks broke off") from exc
        writer.write(line)
    await writer.drain()
