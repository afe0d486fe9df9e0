"""`taskyard up`, contributed by devstack through the `taskyard.commands` entry point: its
options, its settings check, the stack it starts."""

from __future__ import annotations

from pathlib import Path

import pytest
from dev_install import declared, taskyard_cli

from devstack.cli import local_stack, unconfined_note
from taskyard.client.cli import parser as taskyard_parser
from taskyard.plumbing.settings import GatewaySettings


def test_pyproject_contributes_up_with_its_options(tmp_path: Path) -> None:
    result = taskyard_cli(tmp_path, "up", "--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: taskyard up")
    for option in ("--sandbox {docker,local}", "--gateway-port", "--task"):
        assert option in result.stdout


def test_up_refuses_bad_settings_before_starting_anything(tmp_path: Path) -> None:
    result = taskyard_cli(tmp_path, "up", "--gateway-port", "1", TASKYARD_API_KEYS="justakey")
    assert result.returncode == 2
    assert "TASKYARD_API_KEYS must be key=tenant pairs separated by commas" in result.stderr
    assert "unpack" not in result.stderr and "starting" not in result.stdout


def test_up_serves_the_environments_api_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TASKYARD_API_KEYS", "k1=team-a,k2=team-b")
    parser = taskyard_parser(declared("taskyard.commands"))
    args = parser.parse_args(["up", "--sandbox", "local", "--gateway-port", "8123"])
    stack = local_stack(args, GatewaySettings())
    assert stack.env()["TASKYARD_API_KEYS"] == "k1=team-a,k2=team-b"  # what the gateway reads
    assert stack.api_key == "k1"  # the demo task's
    assert (stack.sandbox_backend, stack.ports.gateway) == ("local", 8123)


@pytest.mark.parametrize("root", [True, False])
def test_up_says_when_its_tool_workers_are_not_confined(
    root: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("devstack.stack.can_confine", lambda: root)
    parser = taskyard_parser(declared("taskyard.commands"))
    docker_stack = local_stack(parser.parse_args(["up"]), GatewaySettings())
    assert bool(unconfined_note(docker_stack)) is not root
    local = local_stack(parser.parse_args(["up", "--sandbox", "local"]), GatewaySettings())
    assert unconfined_note(local) == ""  # its workers keep root: the namespace sandbox needs it
