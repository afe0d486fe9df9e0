"""An artifact's name: the output's kind and a hash of its bytes (``figure-3fa2c1d09b7e.png``).
Unique within the task without any counter to share, the same for the same bytes (a
redelivered job stores the same artifact again), its type told by its extension, and never a
path."""

from __future__ import annotations

import hashlib
import re
from pathlib import PurePosixPath

from taskyard.plumbing.keys import TASK_ID_PATTERN

__all__ = [
    "ARTIFACT_NAME_PATTERN",
    "EXTENSIONS",
    "MEDIA_TYPES",
    "artifact_name",
    "artifact_url",
    "is_artifact_name",
    "is_task_id",
    "media_type",
]

ARTIFACT_NAME_PATTERN = r"^[a-z]{1,16}-[0-9a-f]{12}\.(png|jpg|svg|html)$"
MEDIA_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".svg": "image/svg+xml",
    ".html": "text/html",
}
EXTENSIONS = {mime: ext for ext, mime in MEDIA_TYPES.items()}
_NAME = re.compile(ARTIFACT_NAME_PATTERN)
_TASK_ID = re.compile(TASK_ID_PATTERN)


def artifact_name(kind: str, mime: str, data: bytes) -> str:
    """``<kind>-<12 hex of sha256>.<ext>``; ValueError for a kind or type no name takes."""
    name = f"{kind}-{hashlib.sha256(data).hexdigest()[:12]}{EXTENSIONS.get(mime, '')}"
    if not is_artifact_name(name):
        raise ValueError(f"no artifact name for a {kind!r} output of type {mime!r}")
    return name


def artifact_url(task_id: str, name: str) -> str:
    """Where the gateway serves it (relative to the gateway's address)."""
    return f"/v1/tasks/{task_id}/artifacts/{name}"


def is_artifact_name(name: str) -> bool:
    return _NAME.fullmatch(name) is not None


def is_task_id(task_id: str) -> bool:
    return _TASK_ID.fullmatch(task_id) is not None


def media_type(name: str) -> str:
    """The media type an artifact's name says (its extension)."""
    return MEDIA_TYPES[PurePosixPath(name).suffix]
