"""Fixtures the agent worker's tests share: a scripted model (the store is the root conftest's)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from devstack.scripted_model import ScriptedModelThread


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedModelThread]:
    with ScriptedModelThread() as model:
        yield model
