"""The tool worker's answers to the gateway's file requests, over a real (bubblewrap) sandbox
provider: each request one `FilesReply`, every refusal a named outcome."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from services.tool_worker.files import FileLimits, serve
from taskyard.plumbing.settings import ToolWorkerSettings
from taskyard.runtime.jobs import SessionFilesJob
from taskyard.sandbox import LocalSandboxProvider

LIMITS = FileLimits(max_bytes=1000, session_max_bytes=1500)


@pytest.fixture(scope="module")
def provider() -> Iterator[LocalSandboxProvider]:
    provider = LocalSandboxProvider(ToolWorkerSettings(sandbox_warm_pool=0), launcher="bwrap")
    yield provider
    provider.close_all()


def _job(op: str, path: str | None = None, session: str = "s") -> SessionFilesJob:
    return SessionFilesJob(tenant="t", session_id=session, op=op, path=path,
                           expires_at=time.time() + 30)  # fmt: skip


def test_write_list_read(provider: LocalSandboxProvider) -> None:
    written, _ = serve(_job("write", "in/a.txt", "wlr"), provider, b"hello", LIMITS)
    assert written.outcome == "ok" and written.file is not None and written.file.size == 5
    listed, _ = serve(_job("list", session="wlr"), provider, None, LIMITS)
    assert listed.listing is not None and [f.path for f in listed.listing.files] == ["in/a.txt"]
    read, data = serve(_job("read", "in/a.txt", "wlr"), provider, None, LIMITS)
    assert (read.outcome, data) == ("ok", b"hello")


def test_a_session_without_a_sandbox_has_no_files(provider: LocalSandboxProvider) -> None:
    for op, path in (("list", None), ("read", "a.txt")):
        reply, data = serve(_job(op, path, "never"), provider, None, LIMITS)
        assert reply.outcome == "no_session" and data == b""
        assert "reaped" in reply.detail
    assert provider.find("t:never") is None  # and asking started none


def test_refusals_are_named(provider: LocalSandboxProvider) -> None:
    serve(_job("write", "big.txt", "ref"), provider, b"x" * 900, LIMITS)
    over, _ = serve(_job("write", "more.txt", "ref"), provider, b"y" * 700, LIMITS)
    assert over.outcome == "quota" and "TASKYARD_FILES_SESSION_MAX_BYTES" in over.detail
    again, _ = serve(_job("write", "big.txt", "ref"), provider, b"z" * 950, LIMITS)
    assert again.outcome == "ok"  # a file replaced does not count twice
    small = FileLimits(max_bytes=100, session_max_bytes=1500)
    large, _ = serve(_job("read", "big.txt", "ref"), provider, None, small)
    assert large.outcome == "too_large" and "TASKYARD_FILES_MAX_BYTES" in large.detail
    missing, _ = serve(_job("read", "nope.txt", "ref"), provider, None, LIMITS)
    assert missing.outcome == "not_found"
    outside, _ = serve(_job("write", "../x", "ref"), provider, b"x", LIMITS)
    assert outside.outcome == "invalid"
    expired, _ = serve(_job("write", "late.txt", "ref"), provider, None, LIMITS)
    assert expired.outcome == "unavailable" and "expired" in expired.detail
