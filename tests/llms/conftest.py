"""Fixture: the fake OpenAI-compatible server on a free 127.0.0.1 port."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer

import pytest
from fake_openai_server import FakeOpenAI, make_handler


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    """A running fake server; `base_url` points at its /v1."""
    state = FakeOpenAI()
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(state))
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    state.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    yield state
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)
