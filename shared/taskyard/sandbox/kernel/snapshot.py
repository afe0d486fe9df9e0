"""A session's namespace saved to files and loaded into another executor: a live fork's copy.

Run by the executor itself, as cells the worker sends (`save` in the source, `load` in the new
session), so the copy takes the path every cell takes and nothing new crosses the supervisor.
The snapshot is pickle protocol 5 with its large buffers (numpy arrays, pandas frames) out of
band: written once to the files, loaded as views of one buffer, never copied again. Functions
and classes the cells defined go by value (cloudpickle, Debian's python3-cloudpickle), modules
by name. A name that cannot be pickled (a socket, a thread, a generator) is left out, and said:
one bad name never fails the copy. Open regular files under the working directory are reopened
at the same path, mode and position (their contents travel with the working directory), and
entries the cells added to `sys.path` are added again, so that modules imported from there
(by name, as every module is) load.

The files are parts of at most `PART_BYTES`, so that each fits one file request of the kernel
protocol (`MAX_REQUEST_BYTES`, in base64). Between two sessions of one fork server the
snapshot skips the files: it is one sealed memory file (`save_sealed`, `handover.py`) that the
executor hands to the supervisor, written behind the save's answer by a copy-on-write child of
the source, and the new session maps it copy-on-write once written (`load_sealed`), its
buffers views of that mapping: the bytes are copied once in all.
"""

from __future__ import annotations

import io
import json
import mmap
import os
import pickle
import random
import shutil
import struct
import sys
from typing import Any

from .handover import await_written, written_behind

__all__ = [
    "PART_BYTES", "SKIPPED_NAME", "discard", "load", "load_sealed", "save", "save_sealed",
    "take_sealed",
]  # fmt: skip

PART_BYTES = 16 << 20
SKIPPED_NAME = "__fork_skipped__"  # in the new session: what was left out, and why
_HEADER = struct.Struct(">Q")
_ALIGN = 64  # buffers start aligned, so numpy's arrays on them are aligned too
_OWN = {"__builtins__", "__name__", "__doc__", "__loader__", "__spec__", "__package__"}
# Maps what a read of each page would, so the pages count in the new session's memory at once
# (`memory.py`), without the copy a populate of a writable private mapping makes (Linux 5.14).
_MADV_POPULATE_READ = 22
_sealed: list[tuple[int, int]] = []  # what `save_sealed` made, until the executor takes it
_WRITE_WAIT_S = 120.0  # for the source's writer: a whole share's copy takes seconds at most
_REOPENED = {"r": "r", "w": "r+", "x": "r+", "a": "a", "r+": "r+", "w+": "r+", "x+": "r+",
             "a+": "a+"}  # fmt: skip  # never truncate what was copied


def save(namespace: dict[str, Any], directory: str) -> None:
    """Write the namespace's snapshot as parts in `directory` (made afresh); print what was
    left out as one JSON line (the worker reads it from the cell's stdout)."""
    pieces, size, skipped = _snapshot(namespace)
    try:
        shutil.rmtree(directory, ignore_errors=True)
        os.mkdir(directory, 0o700)
        _PartWriter(directory).write_all(pieces)
    except BaseException:  # a full disk, an interrupt: leave the session's disk as it was
        shutil.rmtree(directory, ignore_errors=True)
        raise
    print(json.dumps({"skipped": skipped, "bytes": size, "parts": -(-size // PART_BYTES)}))


def save_sealed(namespace: dict[str, Any], most: int) -> None:
    """Take the namespace's snapshot into a memfd for the executor to hand over with its
    writer's pipe (`take_sealed`); print what was left out as one JSON line. Returns once the
    snapshot is taken, not written (`handover.written_behind`). A snapshot over `most` bytes
    (the new session's memory share) is refused before a byte of it is written."""
    pieces, size, skipped = _snapshot(namespace)
    if size > most:
        raise MemoryError(f"the snapshot is {size} bytes, over the session's share of {most}")
    _sealed.append(written_behind(pieces, size))
    print(json.dumps({"skipped": skipped, "bytes": size, "parts": 0}))


def take_sealed() -> tuple[int, int] | None:
    """The memfd `save_sealed` made and its writer's pipe, now the caller's to send and close;
    None if none."""
    return _sealed.pop() if _sealed else None


def load(namespace: dict[str, Any], directory: str) -> None:
    """Load the snapshot in `directory` into the namespace, then remove it."""
    blob = _read_parts(directory)
    shutil.rmtree(directory, ignore_errors=True)
    _load(namespace, memoryview(blob))


def load_sealed(namespace: dict[str, Any], fd: int, done: int) -> None:
    """Load the snapshot in the memfd `fd` into the namespace once its writer said so on
    `done` and it is sealed (both closed here). Its mapping is private: what this session
    writes to its arrays is copied on write and stays its own; it lives as long as an object
    loaded from it does."""
    try:
        await_written(fd, done, _WRITE_WAIT_S)
        mapping = mmap.mmap(fd, os.fstat(fd).st_size, flags=mmap.MAP_PRIVATE,
                            prot=mmap.PROT_READ | mmap.PROT_WRITE)  # fmt: skip
    finally:
        os.close(fd)
    mapping.madvise(_MADV_POPULATE_READ)
    _load(namespace, memoryview(mapping))


def _load(namespace: dict[str, Any], blob: memoryview) -> None:
    header, payload, buffers = _split(blob)
    # First: modules the cells imported from where they put on the path load by name.
    sys.path[:0] = [entry for entry in header["path"] if entry not in sys.path]
    namespace.update(pickle.loads(payload, buffers=buffers))
    namespace.update(_reopened(header["files"]))
    if header["skipped"]:
        namespace[SKIPPED_NAME] = header["skipped"]
    if header["random"] is not None:
        random.setstate(_tupled(header["random"]))


def discard(directory: str) -> None:
    shutil.rmtree(directory, ignore_errors=True)


def _open_files(values: dict[str, Any], skipped: dict[str, str]) -> dict[str, list[Any]]:
    """Take the namespace's open files out of `values`: those to reopen (path, mode,
    position) by name; the others go to `skipped`. Writers are flushed, so the copied working
    directory holds what they wrote."""
    files: dict[str, list[Any]] = {}
    for name, value in list(values.items()):
        if not isinstance(value, io.IOBase):
            continue
        del values[name]
        spec = _reopen_spec(value)
        if isinstance(spec, str):
            skipped[name] = spec
        else:
            files[name] = spec
    return files


def _reopen_spec(handle: io.IOBase) -> list[Any] | str:
    """[path, mode, position] to reopen an open regular file under the working directory, or
    why it cannot be."""
    if handle.closed:
        return "a closed file"
    path, mode = getattr(handle, "name", None), getattr(handle, "mode", None)
    if not isinstance(path, str) or not isinstance(mode, str):
        return f"an open {type(handle).__name__} with no path"
    path = os.path.abspath(path)
    if not path.startswith(os.getcwd() + os.sep) or not os.path.isfile(path):
        return "an open file outside the working directory, or not a regular file"
    handle.flush()
    binary = "b" if "b" in mode else ""
    return [path, _REOPENED.get(mode.replace("b", ""), "r") + binary, handle.tell()]


def _reopened(files: dict[str, list[Any]]) -> dict[str, Any]:
    handles = {}
    for name, (path, mode, position) in files.items():
        handle = open(path, mode)  # noqa: SIM115 - the namespace holds it, as the source did
        handle.seek(position)
        handles[name] = handle
    return handles


def _pickled(
    values: dict[str, Any], skipped: dict[str, str], namespace: dict[str, Any]
) -> tuple[bytes, list[pickle.PickleBuffer]]:
    """The values pickled together (shared references stay shared), with their large buffers
    apart; a value that cannot be pickled is found by trying each alone, and left out (into
    `skipped`, with why)."""
    try:
        return _dumps(values, namespace)
    except Exception:  # whatever a value's pickling raises: find which one
        pass
    for name, value in list(values.items()):
        try:
            _dumps(value, namespace)  # buffers stay out of band: cheap for arrays
        except Exception as exc:  # each reason is said, none is fatal
            del values[name]
            skipped[name] = f"{type(value).__name__} cannot be copied ({_short(exc)})"
    return _dumps(values, namespace)


def _dumps(value: Any, namespace: dict[str, Any]) -> tuple[bytes, list[pickle.PickleBuffer]]:
    buffers: list[pickle.PickleBuffer] = []
    out = io.BytesIO()
    _pickler(out, namespace, buffers.append).dump(value)
    return out.getvalue(), buffers


class _MainGlobals:
    """Stands for the namespace where a function's globals are: loaded, it is the loading
    interpreter's own namespace."""

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        return _main_globals, ()


def _main_globals() -> dict[str, Any]:
    return sys.modules["__main__"].__dict__


def _pickler(out: io.BytesIO, namespace: dict[str, Any], buffers: Any) -> Any:
    """A cloudpickle pickler (protocol 5, buffers to `buffers`) whose functions defined in the
    cells keep the namespace as their globals once loaded. cloudpickle alone gives them a dict
    of their own: a later cell's `x = 2` would not reach a copied function reading `x`."""
    import cloudpickle  # type: ignore[import-not-found,unused-ignore]  # the image's, lazily

    class Pickler(cloudpickle.Pickler):  # type: ignore[misc,unused-ignore]
        def _function_getnewargs(self, func: Any) -> Any:
            code, base, *rest = super()._function_getnewargs(func)
            return (code, _MainGlobals() if func.__globals__ is namespace else base, *rest)

    return Pickler(out, protocol=5, buffer_callback=buffers)


def _short(exc: Exception) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= 200 else text[:200] + "..."


def _random_state() -> Any:
    """The `random` module's state, if a cell imported it: a copy is a copy, not a reseed."""
    return random.getstate() if "random" in sys.modules else None


def _tupled(state: list[Any]) -> tuple[Any, ...]:
    version, internal, gauss = state
    return (version, tuple(internal), gauss)


def _snapshot(namespace: dict[str, Any]) -> tuple[list[bytes | memoryview], int, dict[str, str]]:
    """The namespace's snapshot as pieces to write in order, its size, and what was left out
    (and why)."""
    values = {k: v for k, v in namespace.items() if k not in _OWN and k != SKIPPED_NAME}
    skipped: dict[str, str] = {}
    files = _open_files(values, skipped)
    payload = _pickled(values, skipped, namespace)
    header = {"files": files, "skipped": skipped, "random": _random_state(), "path": sys.path}
    pieces, size = _pieces(header, payload)
    return pieces, size, skipped


def _pieces(
    header: dict[str, Any], payload: tuple[bytes, list[pickle.PickleBuffer]]
) -> tuple[list[bytes | memoryview], int]:
    """The blob (header, pickle, aligned buffers) as pieces, the buffers views of the objects'
    own memory; its size in bytes."""
    pickled, buffers = payload
    views = [buffer.raw() for buffer in buffers]
    header = {**header, "pickle": len(pickled), "buffers": [view.nbytes for view in views]}
    head = json.dumps(header).encode()
    pieces: list[bytes | memoryview] = [_HEADER.pack(len(head)), head, pickled]
    offset = sum(len(p) for p in pieces)
    for view in views:
        pad = -offset % _ALIGN
        pieces += [bytes(pad), view]
        offset += pad + view.nbytes
    return pieces, offset


class _PartWriter:
    """Bytes in, files of at most PART_BYTES out, named in order."""

    def __init__(self, directory: str) -> None:
        self._directory = directory
        self._index = 0
        self._room = 0
        self._file: io.BufferedWriter | None = None

    def write_all(self, pieces: list[bytes | memoryview]) -> None:
        try:
            for piece in pieces:
                view = memoryview(piece).cast("B")
                while view:
                    view = view[self._write(view) :]
        finally:
            if self._file is not None:
                self._file.close()

    def _write(self, view: memoryview) -> int:
        if self._room == 0:
            if self._file is not None:
                self._file.close()
            self._file = open(os.path.join(self._directory, f"{self._index:05d}"), "wb")  # noqa: SIM115
            self._index, self._room = self._index + 1, PART_BYTES
        assert self._file is not None
        size = min(self._room, len(view))
        self._file.write(view[:size])
        self._room -= size
        return size


def _read_parts(directory: str) -> bytearray:
    names = sorted(os.listdir(directory))
    paths = [os.path.join(directory, name) for name in names]
    blob = bytearray(sum(os.path.getsize(path) for path in paths))
    view, offset = memoryview(blob), 0
    for path in paths:
        with open(path, "rb") as part:
            offset += part.readinto(view[offset:])
    return blob


def _split(view: memoryview) -> tuple[dict[str, Any], memoryview, list[memoryview]]:
    """(header, pickle, buffers) of a blob, the buffers views of it (no copy)."""
    (size,) = _HEADER.unpack_from(view)
    offset = _HEADER.size + size
    header = json.loads(bytes(view[_HEADER.size : offset]))
    payload = view[offset : offset + header["pickle"]]
    offset += header["pickle"]
    buffers = []
    for length in header["buffers"]:
        offset += -offset % _ALIGN
        buffers.append(view[offset : offset + length])
        offset += length
    return header, payload, buffers
