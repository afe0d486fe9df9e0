"""The kernel's two wire formats: JSON lines (worker <-> supervisor) and length-prefixed JSON
frames (supervisor <-> executor). Both buffers refuse to hold more than their limit, so a peer
that never ends a line or announces a huge frame costs a bounded amount of memory."""

from __future__ import annotations

import json
import struct
from typing import Any

__all__ = ["FrameBuffer", "LineBuffer", "TooLong", "encode_frame", "encode_line"]

_LENGTH = struct.Struct(">I")


class TooLong(ValueError):
    """A line or frame over the buffer's limit: the peer is broken or hostile."""


def encode_line(message: dict[str, Any]) -> bytes:
    return _encode(message) + b"\n"


def encode_frame(message: dict[str, Any]) -> bytes:
    body = _encode(message)
    return _LENGTH.pack(len(body)) + body


def _encode(message: dict[str, Any]) -> bytes:
    # ASCII JSON: text a cell printed may hold lone surrogates, which UTF-8 cannot carry but
    # a JSON escape can (the worker replaces them where it stores the result).
    return json.dumps(message).encode()


class LineBuffer:
    """Bytes in, complete lines out; raises `TooLong` once a line passes `limit` bytes.

    Each byte is searched for a newline once, so a long line costs linear time, not quadratic.
    """

    def __init__(self, limit: int) -> None:
        self._data = bytearray()
        self._limit = limit
        self._scanned = 0  # no newline before this offset

    def feed(self, chunk: bytes) -> None:
        self._data += chunk
        if self._newline() < 0 and len(self._data) > self._limit:
            raise TooLong(f"a line of over {self._limit} bytes")

    def pop_line(self) -> bytes | None:
        end = self._newline()
        if end < 0:
            return None
        if end > self._limit:
            raise TooLong(f"a line of over {self._limit} bytes")
        line = bytes(self._data[:end])
        del self._data[: end + 1]
        self._scanned = 0
        return line

    def _newline(self) -> int:
        end = self._data.find(b"\n", self._scanned)
        self._scanned = len(self._data) if end < 0 else end
        return end


class FrameBuffer:
    """Bytes in, decoded frames out; raises `TooLong` for a frame announced over `limit`."""

    def __init__(self, limit: int) -> None:
        self._data = bytearray()
        self._limit = limit

    def feed(self, chunk: bytes) -> None:
        self._data += chunk

    def pop_frame(self) -> dict[str, Any] | None:
        """The next whole frame, or None; raises `TooLong`, or ValueError on a bad body."""
        if len(self._data) < _LENGTH.size:
            return None
        (size,) = _LENGTH.unpack_from(self._data)
        if size > self._limit:
            raise TooLong(f"a frame of {size} bytes (limit {self._limit})")
        end = _LENGTH.size + size
        if len(self._data) < end:
            return None
        body = bytes(self._data[_LENGTH.size : end])
        del self._data[:end]
        message = json.loads(body)
        if not isinstance(message, dict):
            raise ValueError(f"a frame that is not an object: {body[:100]!r}")
        return message
