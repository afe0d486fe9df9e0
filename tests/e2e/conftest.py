"""Fixtures every end-to-end module shares: the stack (a module that needs other settings
defines its own `stack`), a client with the stack's first key and a webhook receiver.

The modules on the default stack share one: they run first here, one after another, and the
stack is started before the first and stopped after the last (a stack takes some 12 s to start
and stop on 2 cores). Each uses session ids of its own, so what one leaves never meets another.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from e2e_support import HookReceiver

from devstack.stack import LocalStack
from taskyard.client import TaskyardClient

_HERE = Path(__file__).resolve().parent


def _on_default_stack(item: pytest.Item) -> bool:
    """Whether the test asks for `stack` and its module defines none of its own."""
    if not isinstance(item, pytest.Function) or _HERE not in item.path.resolve().parents:
        return False
    return "stack" in item.fixturenames and not hasattr(item.module, "stack")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # The modules on the default stack first among this folder's, whole and each in its own
    # order (the sort is stable); every other test keeps its place.
    shared = {item.path for item in items if _on_default_stack(item)}
    places = [i for i, item in enumerate(items) if _HERE in item.path.resolve().parents]
    ordered = sorted((items[i] for i in places), key=lambda item: item.path not in shared)
    for place, item in zip(places, ordered, strict=True):
        items[place] = item


@dataclass
class _SharedStack:
    """The default stack: started for the first module on it, stopped after the last."""

    modules: set[Path]  # the modules on it still to run
    stack: LocalStack | None = field(default=None)

    def lease(self) -> LocalStack:
        if self.stack is not None and not _whole(self.stack):
            self.close()  # a module failed with a service down: the next starts afresh
        if self.stack is None:
            self.stack = LocalStack(sandbox_backend="docker").start()
        return self.stack

    def release(self, module: Path) -> None:
        self.modules.discard(module)
        if not self.modules:
            self.close()

    def close(self) -> None:
        if self.stack is not None:
            self.stack.stop()
            self.stack = None


def _whole(stack: LocalStack) -> bool:
    """Whether every service the stack started still runs."""
    return stack.procs.keys() == stack.argvs.keys() and all(
        child.popen.poll() is None for child in stack.procs.values()
    )


@pytest.fixture(scope="package")
def _shared_stack(request: pytest.FixtureRequest, sandbox_image: str) -> Iterator[_SharedStack]:
    items = request.session.items
    shared = _SharedStack({item.path for item in items if _on_default_stack(item)})
    yield shared
    shared.close()  # a run stopped early (-x, Ctrl-C) left it up


@pytest.fixture(scope="module")
def stack(request: pytest.FixtureRequest, _shared_stack: _SharedStack) -> Iterator[LocalStack]:
    """Every service as a process, Docker sandboxes, the default settings (its key, dev-key,
    is the one the README uses); one stack for every module that uses this fixture."""
    yield _shared_stack.lease()
    _shared_stack.release(request.path)


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
