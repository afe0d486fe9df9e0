"""The README's "Using it" examples run as written against the local stack: the curl
commands, the CLI (whose own example must give the right answer with the scripted model) and
the Python client, sync and async. Only the gateway's address and the task ids change."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from devstack.stack import LocalStack

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
SECTION = (ROOT / "README.md").read_text().split("## Using it", 1)[1].split("\n## ", 1)[0]
SHELL, CLI = re.findall(r"\n```\n(.*?)```", SECTION, re.DOTALL)[:2]
PYTHON = re.findall(r"```python\n(.*?)```", SECTION, re.DOTALL)
ANSWER = str(2**100)
README_GATEWAY = "http://127.0.0.1:8000"


def _commands(block: str) -> list[str]:
    """The block's commands, as bash reads them (a command starts a line; continuation lines
    and quoted newlines stay with it)."""
    return [command.strip() for command in re.split(r"\n(?=curl |taskyard )", block)]


def _run(command: str, stack: LocalStack) -> subprocess.CompletedProcess:
    env = {**os.environ, "TASKYARD_URL": stack.gateway_url, "PYTHONPATH": str(ROOT),
           "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}  # fmt: skip
    return subprocess.run(
        ["bash", "-c", command], capture_output=True, text=True, timeout=120, env=env, cwd=ROOT
    )


def test_the_curl_examples(stack: LocalStack) -> None:
    submit, get, events, cancel = _commands(SHELL)
    address = stack.gateway_url.removeprefix("http://")
    run = lambda command: _run(command.replace("localhost:8000", address), stack)  # noqa: E731
    accepted = json.loads(run(submit).stdout)
    assert accepted["status"] == "queued" and accepted["session_id"] == "s1"
    task_id = accepted["id"]
    stream = run(events.replace("<id>", task_id)).stdout  # follows until the task ends
    assert "event: status" in stream and '"status":"succeeded"' in stream
    task = json.loads(run(get.replace("<id>", task_id)).stdout)
    assert task["status"] == "succeeded" and "42" in task["result"]
    assert json.loads(run(cancel.replace("<id>", task_id)).stdout) == {
        "detail": "task already succeeded"
    }


def test_the_cli_examples(stack: LocalStack) -> None:
    submit, tasks, follow, get, usage = _commands(CLI)
    submitted = _run(submit, stack)
    assert submitted.returncode == 0, submitted.stderr
    task_id = submitted.stdout.split()[1]
    assert ANSWER in submitted.stdout.split("[assistant]")[-1]  # the model's answer, right
    listed = _run(tasks, stack)
    assert listed.stdout.startswith(f"{task_id}  succeeded")
    followed = _run(follow.replace("<task id>", task_id), stack)
    assert followed.returncode == 0 and ANSWER in followed.stdout
    got = _run(get.replace("<task id>", task_id), stack)
    assert f"{task_id}: succeeded" in got.stdout and ANSWER in got.stdout
    assert _run(usage, stack).stdout.startswith("usage: taskyard")


@pytest.mark.parametrize("example", range(2), ids=["sync client", "async client"])
def test_the_python_client_examples(stack: LocalStack, example: int) -> None:
    source = PYTHON[example].replace(README_GATEWAY, stack.gateway_url)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(source, "README.md", "exec"), {"__name__": "readme"})
    lines = printed.getvalue().splitlines()
    assert any(line.startswith("message ") and ANSWER in line for line in lines)
    final = lines[-2] if example else lines[-1]
    assert final.startswith("status {'status': 'succeeded'") and ANSWER in final
    if example:  # the async example ends with the newest task's status, from the list
        assert lines[-1] == "succeeded"
