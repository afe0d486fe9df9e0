"""A session's files: the kernel's supervisor confines every request to the working directory
(no '..', no absolute path, no link followed, no FIFO opened), and the sandbox layer moves
files in and out of a running kernel on every backend."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from taskyard.sandbox.errors import FileRefused, NoLiveSandbox
from taskyard.sandbox.kernel import FILE_CHUNK_BYTES, MAX_LISTED_FILES
from taskyard.sandbox.kernel.files import WorkDir
from taskyard.sandbox.local.kernel_copy import KERNEL_SOURCE
from taskyard.sandbox.provider import KernelSandboxProvider

TIMEOUT = 20.0
ESCAPES = ["../x", "/tmp/x", "a/../../x", "a//b", "./a", "a/.", "a/", "x\n", "."]


class Kernel:
    """The kernel as a plain process whose working directory is `workdir`."""

    def __init__(self, workdir: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-P", "-m", "kernel"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env={"PYTHONPATH": str(KERNEL_SOURCE.parent)}, text=True, cwd=workdir,
        )  # fmt: skip
        self.ids = 0
        assert json.loads(self.line()) == {"ready": True}

    def ask(self, **request: Any) -> dict[str, Any]:
        self.ids += 1
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"id": self.ids, "nonce": "n", **request}) + "\n")
        self.process.stdin.flush()
        reply = json.loads(self.line())
        assert (reply["id"], reply["nonce"]) == (self.ids, "n")
        return reply

    def write(self, path: str, data: bytes) -> dict[str, Any]:
        return self.ask(file_op="write", path=path, data=base64.b64encode(data).decode())

    def line(self) -> str:
        assert self.process.stdout is not None
        return self.process.stdout.readline()


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory beside the working directory: nothing may ever land here."""
    (tmp_path / "outside").mkdir()
    return tmp_path / "outside"


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "work").mkdir()
    return tmp_path / "work"


@pytest.fixture
def kernel(workdir: Path, outside: Path) -> Iterator[Kernel]:
    started = Kernel(workdir)
    yield started
    started.process.kill()
    started.process.wait()


def test_a_written_file_is_read_back_and_listed(kernel: Kernel, workdir: Path) -> None:
    written = kernel.write("data/in.csv", b"a,b\n1,2\n")
    assert written["file"]["path"] == "data/in.csv" and written["file"]["size"] == 8
    assert (workdir / "data/in.csv").read_bytes() == b"a,b\n1,2\n"
    read = kernel.ask(file_op="read", path="data/in.csv", offset=0)
    assert base64.b64decode(read["data"]) == b"a,b\n1,2\n" and read["size"] == 8
    listed = kernel.ask(file_op="list")
    assert [f["path"] for f in listed["files"]] == ["data/in.csv"]
    assert listed["truncated"] is False


def test_a_write_replaces_the_file_whole(kernel: Kernel, workdir: Path) -> None:
    kernel.write("f.txt", b"old and longer")
    kernel.write("f.txt", b"new")
    assert (workdir / "f.txt").read_bytes() == b"new"
    assert sorted(os.listdir(workdir)) == ["f.txt"]  # no temporary file left beside it


@pytest.mark.parametrize("path", ESCAPES)
def test_paths_that_leave_the_working_directory_are_refused(
    kernel: Kernel, workdir: Path, outside: Path, path: str
) -> None:
    assert kernel.write(path, b"x")["refused"] == "invalid"
    assert kernel.ask(file_op="read", path=path, offset=0)["refused"] == "invalid"
    assert os.listdir(outside) == [] and os.listdir(workdir) == []


def test_links_are_never_followed(kernel: Kernel, workdir: Path, outside: Path) -> None:
    (outside / "secret").write_text("not yours")
    (workdir / "secret").symlink_to(outside / "secret")
    (workdir / "up").symlink_to("..")
    (workdir / "out").symlink_to(outside)
    for path in ("secret", "out/secret", "up/outside/secret"):
        refused = kernel.ask(file_op="read", path=path, offset=0)
        assert refused["refused"] == "not_a_file", path
        assert "symbolic link" in refused["error"]
    for path in ("secret", "up/escape.txt", "out/escape.txt"):
        written = kernel.write(path, b"escaped?")
        if path == "secret":  # the link itself is replaced by the file, never written through
            assert written["file"]["size"] == 8
        else:
            assert written["refused"] == "not_a_file", path
    assert sorted(os.listdir(outside)) == ["secret"]
    assert (outside / "secret").read_text() == "not yours"
    listed = [f["path"] for f in kernel.ask(file_op="list")["files"]]
    assert listed == ["secret"]  # the uploaded file; no link, nothing behind one


def test_a_copy_into_another_working_directory_takes_regular_files_only(
    workdir: Path, outside: Path, tmp_path: Path
) -> None:
    """`WorkDir.copy_into` (a fork server's fork): files and directories, never a link, a
    FIFO, or what is behind them."""
    (outside / "secret").write_text("not yours")
    (workdir / "a" / "b").mkdir(parents=True)
    (workdir / "a" / "b" / "deep.txt").write_text("deep")
    (workdir / "top.bin").write_bytes(bytes(range(256)) * 4096)
    (workdir / "secret").symlink_to(outside / "secret")
    (workdir / "out").symlink_to(outside)
    os.mkfifo(workdir / "pipe")
    target = tmp_path / "target"
    (target / "a").mkdir(parents=True)
    (target / "a" / "old.txt").write_text("kept")
    (target / "top.bin").write_text("replaced")
    copied = WorkDir(str(workdir)).copy_into(WorkDir(str(target)))
    assert copied == (2, False)
    found = sorted(str(p.relative_to(target)) for p in target.rglob("*") if p.is_file())
    assert found == ["a/b/deep.txt", "a/old.txt", "top.bin"]
    assert (target / "top.bin").read_bytes() == bytes(range(256)) * 4096
    assert (target / "a" / "b" / "deep.txt").read_text() == "deep"
    assert not (target / "secret").exists() and not (target / "out").exists()


def test_a_fifo_is_refused_at_once(kernel: Kernel, workdir: Path) -> None:
    os.mkfifo(workdir / "pipe")
    started = time.monotonic()
    assert kernel.ask(file_op="read", path="pipe", offset=0)["refused"] == "not_a_file"
    assert time.monotonic() - started < 5  # an open() that blocked would never return
    assert kernel.ask(file_op="list")["files"] == []


def test_reads_come_in_chunks(kernel: Kernel, workdir: Path) -> None:
    (workdir / "big").write_bytes(b"x" * FILE_CHUNK_BYTES + b"0123456789")
    first = kernel.ask(file_op="read", path="big", offset=0)
    assert len(base64.b64decode(first["data"])) == FILE_CHUNK_BYTES
    assert first["size"] == FILE_CHUNK_BYTES + 10
    rest = kernel.ask(file_op="read", path="big", offset=FILE_CHUNK_BYTES)
    assert base64.b64decode(rest["data"]) == b"0123456789"


def test_a_listing_is_bounded(kernel: Kernel, workdir: Path) -> None:
    for n in range(MAX_LISTED_FILES + 5):
        (workdir / f"f{n:05}").touch()
    listed = kernel.ask(file_op="list")
    assert len(listed["files"]) == MAX_LISTED_FILES and listed["truncated"] is True


def test_a_listing_of_long_escaped_names_still_fits_its_line(kernel: Kernel, workdir: Path) -> None:
    # 1000 paths of 1023 characters, each 6 bytes in JSON: 6 MB, past a line's 4 MiB.
    deep = workdir.joinpath(*["é" * 127] * 7)
    deep.mkdir(parents=True)
    for n in range(MAX_LISTED_FILES):
        (deep / f"{n:03}{'é' * 124}").touch()
    listed = kernel.ask(file_op="list")  # one line, of at most MAX_LINE_BYTES
    assert listed["truncated"] is True and 300 < len(listed["files"]) < MAX_LISTED_FILES


def test_missing_files_and_directories(kernel: Kernel, workdir: Path) -> None:
    (workdir / "dir").mkdir()
    (workdir / "file").touch()
    assert kernel.ask(file_op="read", path="nope", offset=0)["refused"] == "not_found"
    assert kernel.ask(file_op="read", path="dir", offset=0)["refused"] == "not_a_file"
    assert kernel.write("dir", b"x")["refused"] == "not_a_file"  # a directory is not replaced
    assert kernel.write("file/x", b"x")["refused"] == "not_a_file"  # nor a file made a directory


# -- through the sandbox layer, on every backend ------------------------------------------


@pytest.fixture(params=["docker", "bwrap"])
def files_provider(
    request: pytest.FixtureRequest, make_docker_provider: Any, make_local_provider: Any
) -> KernelSandboxProvider:
    if request.param == "docker":
        return make_docker_provider()
    return make_local_provider(launcher="bwrap")


def test_files_and_cells_share_the_working_directory(
    files_provider: KernelSandboxProvider,
) -> None:
    sandbox = files_provider.get("t:files")
    info = sandbox.write_file("data/in.csv", b"a,b\n1,2\n")
    assert (info.path, info.size) == ("data/in.csv", 8)
    ran = sandbox.run("print(open('data/in.csv').read().split()[1])\n"
                      "open('out.txt', 'w').write('made here')", TIMEOUT)  # fmt: skip
    assert ran.stdout == "1,2\n", ran
    listing = sandbox.list_files()
    assert [f.path for f in listing.files] == ["data/in.csv", "out.txt"]
    assert sandbox.read_file("out.txt", 100) == b"made here"
    with pytest.raises(FileRefused) as refused:
        sandbox.read_file("out.txt", 5)
    assert refused.value.reason == "too_large"


def test_reading_never_starts_a_sandbox(files_provider: KernelSandboxProvider) -> None:
    assert files_provider.find("t:none") is None
    sandbox = files_provider.get("t:none")
    assert files_provider.find("t:none") is None  # a session object, but no kernel yet
    with pytest.raises(NoLiveSandbox):
        sandbox.list_files()
    sandbox.write_file("x", b"1")  # a write starts one
    assert files_provider.find("t:none") is sandbox


def test_a_large_file_travels_both_ways(make_docker_provider: Any) -> None:
    data = os.urandom(3 * FILE_CHUNK_BYTES + 123)
    sandbox = make_docker_provider().get("t:large")
    sandbox.write_file("blob.bin", data)
    assert sandbox.run("len(open('blob.bin', 'rb').read())", TIMEOUT).result == str(len(data))
    assert sandbox.read_file("blob.bin", len(data)) == data


def test_a_full_disk_refuses_the_write(make_docker_provider: Any, settings: Any) -> None:
    provider = make_docker_provider(settings=settings.model_copy(update={"sandbox_disk": "1m"}))
    with pytest.raises(FileRefused) as refused:
        provider.get("t:full").write_file("big", b"x" * (2 << 20))
    assert refused.value.reason == "no_space"
    assert provider.get("t:full").list_files().files == []  # nothing half-written left


def test_a_reaped_session_has_no_files(make_local_provider: Any) -> None:
    provider = make_local_provider(launcher="bwrap", idle_s=0.0)
    provider.get("t:reaped").write_file("x", b"1")
    assert provider.reap_idle() == ["t:reaped"]
    assert provider.find("t:reaped") is None
