"""A cell's reply as it leaves the sandbox: the executor's frame made into what the supervisor
sends the worker, every cap on it applied here, and the line it goes out as (`fit_line`).

The executor caps its own output, but a cell runs in that process and can write any frame to
its socket, so those caps are a convenience. The supervisor runs no user code: here it takes
from a frame only the fields a reply has, refuses a frame of the wrong shape (`Malformed`: a
text that is not text, rich outputs that are not a list of known forms) and cuts the rest to
the caps: each text to OUTPUT_LIMIT characters, rich outputs to DISPLAY_MAX_OUTPUTS and
DISPLAY_LIMIT bytes, each output's text to DISPLAY_TEXT_LIMIT. What it left out, it says on
the reply's stderr, as the executor would have. The worker checks the same caps again.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from . import (
    BINARY_MIMES,
    DISPLAY_KINDS,
    DISPLAY_LIMIT,
    DISPLAY_MAX_OUTPUTS,
    DISPLAY_MIMES,
    DISPLAY_TEXT_LIMIT,
    MAX_DISPLAY_TEXT_CHARS,
    MAX_LINE_BYTES,
    MAX_TEXT_CHARS,
    OUTPUT_LIMIT,
)
from .wire import encode_line

__all__ = ["TEXT_FIELDS", "Malformed", "cell_reply", "fit_line"]

TEXT_FIELDS = ("stdout", "stderr", "result", "error")
_NOTE_ROOM = 500  # left under MAX_TEXT_CHARS for the note on what was left out


class Malformed(ValueError):
    """A frame no honest executor sends: a field of the wrong type or form."""


def cell_reply(frame: dict[str, Any]) -> dict[str, Any]:
    """The frame's texts and rich outputs within the caps; raises `Malformed`."""
    most = MAX_TEXT_CHARS - _NOTE_ROOM
    texts = {key: _cut(_text(frame, key), most, OUTPUT_LIMIT) for key in TEXT_FIELDS}
    display, left_out = _display(frame.get("display"))
    if left_out:
        texts["stderr"] = (texts["stderr"] or "") + (
            f"[{left_out} rich outputs were left out: a cell returns at most "
            f"{DISPLAY_MAX_OUTPUTS} rich outputs and {DISPLAY_LIMIT} bytes of them]\n"
        )
    return {**texts, "display": display}


def _text(frame: dict[str, Any], key: str) -> str | None:
    value = frame.get(key)
    if value is not None and not isinstance(value, str):
        raise Malformed(f"its {key} is not text")
    return value


def _cut(text: str | None, most: int, keep: int) -> str | None:
    """`text` if it has at most `most` characters, else its first `keep` and a note."""
    if text is None or len(text) <= most:
        return text
    return text[:keep] + f"\n[... {len(text) - keep} more characters not shown]\n"


def _display(raw: Any) -> tuple[list[dict[str, str]], int]:
    """The rich outputs kept, in order, and how many were left out for the caps."""
    if raw is None:
        return [], 0
    if not isinstance(raw, list):
        raise Malformed("rich outputs that are not a list")
    kept: list[dict[str, str]] = []
    size = 0
    for item in raw:
        if len(kept) == DISPLAY_MAX_OUTPUTS:
            break  # the rest are not even looked at
        output, item_size = _output(item)
        if size + item_size <= DISPLAY_LIMIT:
            kept.append(output)
            size += item_size
    return kept, len(raw) - len(kept)


def _output(item: Any) -> tuple[dict[str, str], int]:
    """One rich output, rebuilt from its four known fields, and its size in bytes (decoded)."""
    if not isinstance(item, dict):
        raise Malformed("a rich output that is not an object")
    mime, data, text, kind = (item.get(k) for k in ("mime", "data", "text", "kind"))
    if mime not in DISPLAY_MIMES or kind not in DISPLAY_KINDS:
        raise Malformed("a rich output of no known type or kind")
    if not isinstance(data, str) or not isinstance(text, str):
        raise Malformed("a rich output whose data or text is not text")
    text = _cut(text, MAX_DISPLAY_TEXT_CHARS, DISPLAY_TEXT_LIMIT) or ""
    output = {"mime": mime, "data": data, "text": text, "kind": kind}
    return output, _size(mime, data)


def _size(mime: str, data: str) -> int:
    if mime not in BINARY_MIMES:
        return len(data.encode(errors="replace"))
    try:
        return len(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        raise Malformed("a binary rich output that is not base64") from None


def fit_line(reply: dict[str, Any]) -> bytes:
    """The reply as one line of at most MAX_LINE_BYTES: halving the longest text, then leaving
    out rich outputs from the last, until it fits."""
    line = encode_line(reply)
    while len(line) > MAX_LINE_BYTES:
        key = max(TEXT_FIELDS, key=lambda k: len(reply.get(k) or ""))
        text = reply.get(key) or ""
        if len(text) >= 1000:
            keep = len(text) // 2
            reply[key] = text[:keep] + f"\n[... {len(text) - keep} more characters not shown]\n"
        elif reply.get("display"):
            reply["display"] = reply["display"][:-1]
            left_out = "[a rich output was left out: the reply was too long]\n"
            reply["stderr"] = (reply.get("stderr") or "") + left_out
        else:
            break  # nothing left to cut: only a huge id or nonce, which the worker chose
        line = encode_line(reply)
    return line
