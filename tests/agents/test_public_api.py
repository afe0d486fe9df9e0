"""The declared public surface of the agent model's packages: every name in `__all__` exists,
and the issue's import line works."""

from __future__ import annotations

import importlib

import pytest

PACKAGES = [
    "taskyard.agentkit.agents",
    "taskyard.agentkit.memory",
    "taskyard.agentkit.aggregators",
    "taskyard.agentkit.llms",
    "taskyard.agentkit.hooks",
]


@pytest.mark.parametrize("name", PACKAGES)
def test_all_names_exist(name: str) -> None:
    package = importlib.import_module(name)
    assert package.__all__ == sorted(package.__all__)
    missing = [item for item in package.__all__ if not hasattr(package, item)]
    assert missing == []


def test_issue_import_line() -> None:
    from taskyard.agentkit.agents import Agent, AsyncAgent, Sequential

    assert issubclass(Sequential, Agent)
    assert not issubclass(AsyncAgent, Agent)
