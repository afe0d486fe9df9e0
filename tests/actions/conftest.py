"""Fixtures for the action tests: the local sandbox backend and a fake web on loopback."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer

import pytest
from action_fakes import FakeSearch, SearchHandler

from shared.sandbox import SandboxProvider, make_sandbox_provider
from shared.settings import Settings


@pytest.fixture(scope="session")
def local_sandboxes() -> Iterator[SandboxProvider]:
    """The real local (namespace) sandbox backend; kernels start on a session's first run."""
    provider = make_sandbox_provider(Settings(sandbox_backend="local", sandbox_warm_pool=0))
    yield provider
    provider.close_all()


@pytest.fixture
def search_server() -> Iterator[FakeSearch]:
    """A SearxNG-shaped search API and a few web pages over real HTTP on 127.0.0.1."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), SearchHandler)
    server.requests = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    yield FakeSearch(server)
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)
