"""The working directory's files, read and written by the supervisor for the worker.

Paths are relative to the working directory and checked (`path_parts`): not absolute, no
``..``, ``.`` or empty parts, no control characters. Each part is then opened with O_NOFOLLOW
from the directory before it, so a symbolic link a cell made (to /etc, to /proc/1, to ``..``)
is refused, never followed; only regular files are read, opened non-blocking (a FIFO a cell
made cannot stall the supervisor). The supervisor runs no user code, so no cell can change what
these functions do; what it could do is change the files between two calls.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import itertools
import json
import os
import stat
from collections.abc import Callable, Iterator
from typing import Any

from . import FILE_CHUNK_BYTES, MAX_LINE_BYTES, MAX_LISTED_FILES

__all__ = ["MAX_PATH_CHARS", "FileRefused", "WorkDir", "path_parts"]

MAX_PATH_CHARS = 1024
_MAX_PARTS = 32
_MAX_PART_BYTES = 255  # NAME_MAX
_SCAN_LIMIT = 20_000  # directory entries one listing looks at, so a million files cost little
# A listing's share of its reply line: the names are a cell's choice, and escaped in JSON a
# thousand long non-ASCII paths would not fit one.
_LISTING_BYTES = MAX_LINE_BYTES // 2
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_uploads = itertools.count(1)


class FileRefused(Exception):
    """A file request the working directory refuses; `reason` is one of "invalid",
    "not_found", "not_a_file", "no_space"."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def path_parts(path: object) -> list[str]:
    """The parts of a path inside the working directory; ValueError saying what is wrong."""
    if not isinstance(path, str) or not path:
        raise ValueError("a path must be a non-empty string")
    if len(path) > MAX_PATH_CHARS:
        raise ValueError(f"a path is at most {MAX_PATH_CHARS} characters")
    if path.startswith("/"):
        raise ValueError("a path is relative to the working directory (no leading '/')")
    if any(ord(c) < 32 or c == "\x7f" for c in path):
        raise ValueError("a path holds no control characters")
    parts = path.split("/")
    if len(parts) > _MAX_PARTS:
        raise ValueError(f"a path has at most {_MAX_PARTS} parts")
    for part in parts:
        if part in ("", ".", ".."):
            raise ValueError("a path has no empty, '.' or '..' parts: it stays in the working "
                             "directory")  # fmt: skip
        try:
            encoded = part.encode()
        except UnicodeEncodeError:
            raise ValueError("a path must be valid Unicode text") from None
        if len(encoded) > _MAX_PART_BYTES:
            raise ValueError(f"a path's parts are at most {_MAX_PART_BYTES} bytes")
    return parts


def _checked(path: object) -> list[str]:
    try:
        return path_parts(path)
    except ValueError as exc:
        raise FileRefused("invalid", str(exc)) from None


def _info(path: str, st: os.stat_result) -> dict[str, Any]:
    return {"path": path, "size": st.st_size, "modified": st.st_mtime}


class WorkDir:
    """The working directory, held open from the supervisor's start."""

    def __init__(self, path: str = ".") -> None:
        self._root = os.open(path, _DIR)

    def write(self, path: object, data: bytes) -> dict[str, Any]:
        """Put `data` at `path` (making its directories), replacing a file there, atomically:
        a new file beside it is renamed over it."""
        return self._replace(_checked(path), lambda fd: _write_all(fd, data))

    def read(self, path: object, offset: int) -> tuple[bytes, os.stat_result]:
        """At most FILE_CHUNK_BYTES of the regular file at `path` from `offset`, and its stat."""
        fd, st = self._open_regular(_checked(path))
        try:
            return os.pread(fd, FILE_CHUNK_BYTES, max(0, offset)), st
        finally:
            os.close(fd)

    def copy_into(self, target: WorkDir) -> tuple[int, bool]:
        """Copy every regular file here to the same path in `target` (replacing one there),
        in the kernel, never through the worker: a fork's copy between two sessions of one
        fork server. (Files copied, whether some were left out: past _SCAN_LIMIT entries.) A
        file removed or replaced meanwhile is left out; a full target raises FileRefused
        "no_space"."""
        copied = 0
        for scanned, (prefix, entry) in enumerate(self._walk(), 1):
            if scanned > _SCAN_LIMIT:
                return copied, True
            if not entry.is_file(follow_symlinks=False):
                continue
            parts = (prefix + entry.name).split("/")  # `_walk` yields addressable paths only
            try:
                fd, st = self._open_regular(parts)
            except FileRefused:
                continue  # gone, or no longer a regular file
            try:
                target._replace(parts, functools.partial(_send, source=fd, size=st.st_size))
            finally:
                os.close(fd)
            copied += 1
        return copied, False

    def _open_regular(self, parts: list[str]) -> tuple[int, os.stat_result]:
        """The regular file at `parts` opened for reading (the caller closes it), and its stat."""
        name = "/".join(parts)
        with self._parent(parts, create=False) as parent:
            try:
                fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
                             | os.O_CLOEXEC, dir_fd=parent)  # fmt: skip
            except OSError as exc:
                raise _refusal(exc, name) from None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise FileRefused("not_a_file", f"{name} is not a regular file")
        return fd, st

    def _replace(self, parts: list[str], fill: Callable[[int], None]) -> dict[str, Any]:
        """A new file at `parts`, its contents written by `fill`, renamed over what is there."""
        with self._parent(parts, create=True) as parent:
            temporary = f".taskyard-upload-{os.getpid()}-{next(_uploads)}"
            try:
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
                fd = os.open(temporary, flags, 0o644, dir_fd=parent)
                try:
                    fill(fd)
                finally:
                    os.close(fd)
                os.rename(temporary, parts[-1], src_dir_fd=parent, dst_dir_fd=parent)
                st = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
            except OSError as exc:
                with contextlib.suppress(OSError):
                    os.unlink(temporary, dir_fd=parent)
                raise _refusal(exc, "/".join(parts)) from None
        return _info("/".join(parts), st)

    def listing(self) -> tuple[list[dict[str, Any]], bool]:
        """Regular files under the working directory, by path, and whether more were left out
        (past MAX_LISTED_FILES, or _LISTING_BYTES of JSON). Symbolic links are not followed;
        names no path could address are left out."""
        files: list[dict[str, Any]] = []
        size = 0
        for scanned, (prefix, entry) in enumerate(self._walk(), 1):
            if scanned > _SCAN_LIMIT or len(files) >= MAX_LISTED_FILES or size > _LISTING_BYTES:
                return sorted(files, key=lambda f: f["path"]), True
            with contextlib.suppress(OSError):  # removed meanwhile
                st = entry.stat(follow_symlinks=False)
                if stat.S_ISREG(st.st_mode):
                    files.append(_info(prefix + entry.name, st))
                    size += len(json.dumps(files[-1]))
        return sorted(files, key=lambda f: f["path"]), False

    def _walk(self) -> Iterator[tuple[str, os.DirEntry[str]]]:
        """(directory prefix, entry) for every addressable entry, depth first."""
        pending = [("", os.dup(self._root), 0)]
        try:
            while pending:
                prefix, fd, depth = pending.pop()
                try:
                    for entry in _entries(fd):
                        if _addressable(prefix + entry.name):
                            yield prefix, entry
                            if depth + 1 < _MAX_PARTS and entry.is_dir(follow_symlinks=False):
                                child = _open_dir(entry.name, fd)
                                if child is not None:
                                    pending.append((f"{prefix}{entry.name}/", child, depth + 1))
                finally:
                    os.close(fd)
        finally:
            for _, fd, _ in pending:
                os.close(fd)

    @contextlib.contextmanager
    def _parent(self, parts: list[str], create: bool) -> Iterator[int]:
        """The directory holding the path's last part, opened part by part without
        following links; with `create`, missing directories are made."""
        fd = os.dup(self._root)
        try:
            for depth, part in enumerate(parts[:-1]):
                if create:
                    with contextlib.suppress(FileExistsError):
                        _make_dir(part, fd, "/".join(parts[: depth + 1]))
                try:
                    child = os.open(part, _DIR, dir_fd=fd)
                except OSError as exc:
                    # O_NOFOLLOW with O_DIRECTORY says ENOTDIR for a link: say what it is.
                    link = OSError(errno.ELOOP, "a link") if _is_link(part, fd) else None
                    raise _refusal(link or exc, "/".join(parts[: depth + 1])) from None
                os.close(fd)
                fd = child
            yield fd
        finally:
            os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _send(out: int, source: int, size: int) -> None:
    """`size` bytes of `source` into `out`, in the kernel (no copy through this process)."""
    offset = 0
    while offset < size and (sent := os.sendfile(out, source, offset, size - offset)):
        offset += sent


def _entries(fd: int) -> list[os.DirEntry[str]]:
    with contextlib.suppress(OSError), os.scandir(fd) as entries:
        return list(entries)
    return []


def _open_dir(name: str, parent: int) -> int | None:
    try:
        return os.open(name, _DIR, dir_fd=parent)
    except OSError:
        return None  # replaced meanwhile (by a link, a file), or gone


def _is_link(name: str, parent: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _addressable(path: str) -> bool:
    try:
        path_parts(path)
    except ValueError:
        return False
    return True


def _make_dir(part: str, parent: int, name: str) -> None:
    try:
        os.mkdir(part, 0o755, dir_fd=parent)
    except FileExistsError:
        raise
    except OSError as exc:
        raise _refusal(exc, name) from None


def _refusal(exc: OSError, name: str) -> FileRefused:
    """An OS error on `name` as the refusal the worker maps to an answer."""
    if exc.errno == errno.ENOENT:
        return FileRefused("not_found", f"no file {name} in the working directory")
    if exc.errno == errno.ELOOP:
        return FileRefused("not_a_file", f"{name} is a symbolic link: links are never followed")
    if exc.errno in (errno.ENOTDIR, errno.EISDIR):
        what = "not a directory" if exc.errno == errno.ENOTDIR else "a directory"
        return FileRefused("not_a_file", f"{name} is {what}")
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return FileRefused("no_space", "the working directory is full")
    return FileRefused("invalid", f"{name}: {os.strerror(exc.errno or 0)}")
