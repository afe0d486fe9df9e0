"""Artifacts: the files a task's tools made (a cell's figures and tables), kept as files of the
task under ``settings.artifacts_dir/<task id>/<name>``. Tool workers write them; the gateway
serves them; both mount that directory (compose: one volume; past one machine, a shared file
system). Only their descriptions go through Redis, as the task's `artifact` events.

Why a directory and not Redis: a figure is tens to hundreds of kB and a task may make many,
while Redis holds every task's live state in memory. They go after `artifacts_ttl_s`, with the
task's other traces (the tool worker's reaper removes older task directories).

A name is the output's kind and a hash of its bytes (``figure-3fa2c1d09b7e.png``): unique
within the task without any counter to share, the same for the same bytes (a redelivered job
writes the same file again), and never a path.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

from shared.task import TASK_ID_PATTERN

__all__ = [
    "ARTIFACT_NAME_PATTERN",
    "EXTENSIONS",
    "MEDIA_TYPES",
    "ArtifactStore",
    "artifact_name",
    "artifact_url",
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
    if not _NAME.fullmatch(name):
        raise ValueError(f"no artifact name for a {kind!r} output of type {mime!r}")
    return name


def artifact_url(task_id: str, name: str) -> str:
    """Where the gateway serves it (relative to the gateway's address)."""
    return f"/v1/tasks/{task_id}/artifacts/{name}"


class ArtifactStore:
    """Files of tasks under one directory; made on first write."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def put(self, task_id: str, name: str, data: bytes) -> None:
        """Write the file whole or not at all (a new file renamed into place)."""
        folder = self._folder(task_id)
        _check_name(name)
        folder.mkdir(mode=0o755, parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=folder, prefix=".writing-")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            # Readable by the gateway, which may run as another user (compose: the tool
            # worker is root for the Docker socket, the gateway is not).
            os.chmod(temporary, 0o644)
            os.replace(temporary, folder / name)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise

    def path(self, task_id: str, name: str) -> Path | None:
        """The artifact's file if the task has one by that name."""
        if not (_TASK_ID.fullmatch(task_id) and _NAME.fullmatch(name)):
            return None
        path = self.root / task_id / name
        return path if path.is_file() else None

    def task_bytes(self, task_id: str) -> int:
        """What the task's artifacts take so far."""
        folder = self._folder(task_id)
        with contextlib.suppress(FileNotFoundError):
            return sum(entry.stat().st_size for entry in os.scandir(folder) if entry.is_file())
        return 0

    def remove_older_than(self, age_s: float) -> int:
        """Remove the folders of tasks whose artifacts are older than `age_s`; how many."""
        cutoff = time.time() - age_s
        removed = 0
        with contextlib.suppress(FileNotFoundError):
            for entry in os.scandir(self.root):
                if _TASK_ID.fullmatch(entry.name) and entry.stat().st_mtime < cutoff:
                    shutil.rmtree(entry.path, ignore_errors=True)
                    removed += 1
        return removed

    def _folder(self, task_id: str) -> Path:
        if not _TASK_ID.fullmatch(task_id):
            raise ValueError(f"not a task id: {task_id[:80]!r}")
        return self.root / task_id


def _check_name(name: str) -> None:
    if not _NAME.fullmatch(name):
        raise ValueError(f"not an artifact name: {name[:80]!r}")
