"""Fixtures every end-to-end module shares: the stack (a module that needs other settings
defines its own `stack`), a client with the stack's first key and a webhook receiver."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from e2e_support import HookReceiver

from devstack.stack import LocalStack
from shared.client import TaskyardClient


@pytest.fixture(scope="module")
def stack(sandbox_image: str) -> Iterator[LocalStack]:
    """Every service as a process, Docker sandboxes, the default settings (its key, dev-key,
    is the one the README uses)."""
    stack = LocalStack(sandbox_backend="docker").start()
    yield stack
    stack.stop()


@pytest.fixture
def client(stack: LocalStack) -> Iterator[TaskyardClient]:
    """A client of the stack's gateway with its first API key."""
    client = TaskyardClient(stack.gateway_url, stack.api_key)
    yield client
    client.close()


@pytest.fixture
def receiver() -> Iterator[HookReceiver]:
    """A webhook receiver on loopback for this test (`codes` scripts its answers)."""
    server = HookReceiver()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()
