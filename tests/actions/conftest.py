"""Fixtures for the action tests: the local sandbox backend."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from taskyard.plumbing.settings import ToolWorkerSettings
from taskyard.sandbox import SandboxProvider, make_sandbox_provider


@pytest.fixture(scope="session")
def local_sandboxes() -> Iterator[SandboxProvider]:
    """The real local (namespace) sandbox backend; kernels start on a session's first run."""
    provider = make_sandbox_provider(
        ToolWorkerSettings(sandbox_backend="local", sandbox_warm_pool=0)
    )
    yield provider
    provider.close_all()
