"""Fixtures for the action tests: a sandbox provider and a fake search server on loopback."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer

import pytest
from action_fakes import FakeSearch, InProcessProvider, SearchHandler


@pytest.fixture
def sandboxes() -> InProcessProvider:
    return InProcessProvider()


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
