"""Redis replies as our clients get them: text.

redis-py types every reply as `bytes | str` (and XRANGE's as possibly None), whatever the
client; ours are all made with `decode_responses=True`, so each one is text. These say so in
one place: a cast each, since decoding is the client's contract and not checked per reply.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

from redis.typing import StreamRangeResponse, XReadResponse, ZSetRangeResponse

__all__ = [
    "StreamEntry",
    "fields",
    "members",
    "scored",
    "set_members",
    "stream_entries",
    "streams",
    "text",
]

StreamEntry = tuple[str, dict[str, str]]  # its id, its fields


def text(reply: bytes | str | None) -> str | None:
    return cast("str | None", reply)


def fields(reply: Mapping[bytes | str, bytes | str]) -> dict[str, str]:
    """A hash (HGETALL)."""
    return cast("dict[str, str]", reply)


def members(reply: ZSetRangeResponse | list[bytes | str]) -> list[str]:
    """A list (LRANGE), or a sorted set's members asked for without scores."""
    return cast("list[str]", reply)


def set_members(reply: set[bytes | str]) -> set[str]:
    return cast("set[str]", reply)


def scored(reply: ZSetRangeResponse) -> list[tuple[str, float]]:
    """A sorted set's members asked for `withscores`."""
    return cast("list[tuple[str, float]]", reply)


def stream_entries(reply: StreamRangeResponse | None) -> list[StreamEntry]:
    """XRANGE's entries, oldest first."""
    return cast("list[StreamEntry]", reply or [])


def streams(reply: XReadResponse | None) -> list[tuple[str, list[StreamEntry]]]:
    """XREAD's entries by stream (RESP2: a list of pairs; None when the block timed out)."""
    return cast("list[tuple[str, list[StreamEntry]]]", reply or [])
