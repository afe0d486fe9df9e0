"""What a kernel's reply holds, taken on the worker's side: a cell's texts and rich outputs,
and the answers to file requests. The kernel's supervisor caps them (`kernel/replies.py`), but
the worker does not trust the sandbox: anything past the same caps or of the wrong shape is a
broken kernel (`KernelProtocolError`)."""

from __future__ import annotations

import base64
import binascii
import struct
from typing import Any

from taskyard.files.info import FileInfo, FileListing
from taskyard.sandbox.base import DisplayOutput
from taskyard.sandbox.errors import KERNEL_REFUSALS, FileRefused, KernelProtocolError
from taskyard.sandbox.kernel import (
    BINARY_MIMES,
    DISPLAY_KINDS,
    DISPLAY_LIMIT,
    DISPLAY_MAX_OUTPUTS,
    DISPLAY_MIMES,
    FILE_CHUNK_BYTES,
    MAX_DISPLAY_TEXT_CHARS,
    MAX_LISTED_FILES,
    MAX_TEXT_CHARS,
)
from taskyard.sandbox.kernel.files import path_parts
from taskyard.sandbox.kernel.replies import TEXT_FIELDS

__all__ = [
    "check_texts",
    "file_chunk",
    "file_info",
    "file_listing",
    "image_size",
    "parse_display",
    "refusal",
]
_PNG = b"\x89PNG\r\n\x1a\n"
_JPEG_FRAMES = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}  # SOFn markers


def check_texts(reply: dict[str, Any]) -> None:
    """A cell's reply has text (or nothing) in each text field, within MAX_TEXT_CHARS, and a
    yes or no for `interrupted`; `KernelProtocolError` otherwise."""
    for key in TEXT_FIELDS:
        value = reply.get(key)
        if value is not None and not isinstance(value, str):
            raise KernelProtocolError(f"a reply whose {key} is not text")
        if value is not None and len(value) > MAX_TEXT_CHARS:
            raise KernelProtocolError(f"a reply whose {key} is over {MAX_TEXT_CHARS} characters")
    if not isinstance(reply.get("interrupted", False), bool):
        raise KernelProtocolError("a reply whose interrupted is not true or false")


def parse_display(raw: Any) -> list[DisplayOutput]:
    """A reply's ``display`` as checked outputs; `KernelProtocolError` past the caps."""
    if raw is None:
        return []
    if not isinstance(raw, list) or len(raw) > DISPLAY_MAX_OUTPUTS:
        raise KernelProtocolError(f"rich outputs that are not a list of {DISPLAY_MAX_OUTPUTS}")
    outputs = [_output(item) for item in raw]
    if sum(len(o.data) for o in outputs) > DISPLAY_LIMIT:
        raise KernelProtocolError(f"rich outputs over {DISPLAY_LIMIT} bytes")
    return outputs


def _output(item: Any) -> DisplayOutput:
    if not isinstance(item, dict) or item.get("mime") not in DISPLAY_MIMES:
        raise KernelProtocolError("a rich output of no known type")
    mime, data, text, kind = item["mime"], item.get("data"), item.get("text"), item.get("kind")
    if not isinstance(data, str) or not isinstance(text, str) or kind not in DISPLAY_KINDS:
        raise KernelProtocolError("a rich output whose data, text or kind is not of its kind")
    if len(text) > MAX_DISPLAY_TEXT_CHARS:
        raise KernelProtocolError("a rich output's text over its limit")
    decoded = _base64(data) if mime in BINARY_MIMES else data.encode(errors="replace")
    size = image_size(mime, decoded)
    return DisplayOutput(
        mime=mime, data=decoded, text=text, kind=kind,
        width=size[0] if size else None, height=size[1] if size else None,
    )  # fmt: skip


def _base64(data: str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise KernelProtocolError("data that is not base64") from None


def image_size(mime: str, data: bytes) -> tuple[int, int] | None:
    """(width, height) from a PNG's or JPEG's own header; None for other types or garbage."""
    if mime == "image/png":
        if data[:8] == _PNG and data[12:16] == b"IHDR" and len(data) >= 24:
            return struct.unpack(">II", data[16:24])
        return None
    if mime == "image/jpeg":
        return _jpeg_size(data)
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    """Walk the JPEG's segments to its frame header (SOFn), which holds height then width."""
    at = 2
    while data[:2] == b"\xff\xd8" and at + 4 <= len(data) and data[at] == 0xFF:
        marker, length = data[at + 1], struct.unpack(">H", data[at + 2 : at + 4])[0]
        if marker in _JPEG_FRAMES and at + 9 <= len(data):
            height, width = struct.unpack(">HH", data[at + 5 : at + 9])
            return width, height
        at += 2 + length
    return None


# -- file requests ---------------------------------------------------------------------------


def refusal(reply: dict[str, Any]) -> FileRefused | None:
    """The kernel's refusal of a file request, if the reply is one."""
    reason = reply.get("refused")
    if reason is None:
        return None
    message = reply.get("error")
    known = next((r for r in KERNEL_REFUSALS if r == reason), None)
    if known is None or not isinstance(message, str):
        raise KernelProtocolError("a refusal of no known reason")
    return FileRefused(known, message[:2000])


def file_info(raw: Any, path: str | None = None) -> FileInfo:
    """A listed or written file, checked (and, for a write, that it is the path asked)."""
    if not isinstance(raw, dict):
        raise KernelProtocolError("a file description that is not an object")
    try:
        info = FileInfo.model_validate(raw)
        path_parts(info.path)
    except ValueError:
        raise KernelProtocolError("a file description that is not valid") from None
    if path is not None and info.path != path:
        raise KernelProtocolError("a file description of another path")
    return info


def file_listing(reply: dict[str, Any]) -> FileListing:
    files, truncated = reply.get("files"), reply.get("truncated")
    if not isinstance(files, list) or len(files) > MAX_LISTED_FILES:
        raise KernelProtocolError(f"a listing that is not a list of {MAX_LISTED_FILES} files")
    return FileListing(files=[file_info(f) for f in files], truncated=truncated is True)


def file_chunk(reply: dict[str, Any]) -> tuple[bytes, int]:
    """(the chunk's bytes, the file's whole size) of a read's answer."""
    data, size = reply.get("data"), reply.get("size")
    if not isinstance(data, str) or not isinstance(size, int) or isinstance(size, bool):
        raise KernelProtocolError("a file read's answer without data and size")
    chunk = _base64(data)
    if len(chunk) > FILE_CHUNK_BYTES or size < 0:
        raise KernelProtocolError("a file chunk over its limit")
    return chunk, size


def files_copied(reply: dict[str, Any]) -> tuple[int, bool]:
    """(files copied, whether some were left out) of a `copy_from`'s answer."""
    copied, truncated = reply.get("copied"), reply.get("truncated")
    if not isinstance(copied, int) or isinstance(copied, bool) or not isinstance(truncated, bool):
        raise KernelProtocolError("a copy's answer without its count")
    return copied, truncated
