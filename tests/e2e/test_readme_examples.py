"""The README's examples run as written against the local stack: one task through curl, the
CLI (whose own example must give the right answer with the scripted model) and the Python
client; and the async client of docs/api.md. Only the gateway's address and the task ids
change. Every other block of the README is named here with the reason it is not run."""

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
README = (ROOT / "README.md").read_text()
API_PAGE = (ROOT / "docs" / "api.md").read_text()
ANSWER = str(2**100)
README_GATEWAY = "http://127.0.0.1:8000"
# Blocks of the README that this module does not run, each with its first line and why.
NOT_RUN = {
    "docker compose -f compose.yaml -f compose.dev.yaml --env-file deploy/dev.env up --build": (
        "pulls redis and python images: no registry here (tests/deploy/test_compose_dev.py "
        "resolves the files)"
    ),
    "make up      # the local stack + a demo task, printed live; stays up until Ctrl-C": (
        "the two commands themselves: CI runs make test"
    ),
    "> What is the square root of 2, to 12 decimal places? Use Python.": "make up's output",
    "services/gateway/         the HTTP API; each service is thin over the taskyard package": (
        "the layout map: tests/contracts/test_docs_layout.py holds it against the tree"
    ),
}


def _section(page: str, heading: str) -> str:
    return page.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def _block(page: str, heading: str, language: str = "") -> str:
    """The first fenced block of that language in the page's section."""
    return re.findall(rf"```{language}\n(.*?)```", _section(page, heading), re.DOTALL)[0]


SHELL = _block(README, "One task through curl")
MCP = _block(README, "MCP, both ways")
CLI = _block(README, "The CLI")
# (source, where it is written): the sync client's, then the async one's
PYTHON = [
    (_block(README, "The Python client", "python"), "README.md"),
    (_block(API_PAGE, "The Python client", "python"), "docs/api.md"),
]


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
    submit, events, get, cancel = _commands(SHELL)
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
    submit, tasks, follow, get, cancel, sessions, usage = _commands(CLI)
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
    ended = _run(cancel.replace("<task id>", task_id), stack)  # it ended already: refused
    assert ended.returncode == 5 and "already succeeded" in ended.stderr
    listed_sessions = _run(sessions, stack)
    assert listed_sessions.returncode == 0 and "s1" in listed_sessions.stdout
    assert _run(usage, stack).stdout.startswith("usage: taskyard")


@pytest.mark.parametrize("example", range(2), ids=["sync client", "async client"])
def test_the_python_client_examples(stack: LocalStack, example: int) -> None:
    source, page = PYTHON[example]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = compile(source.replace(README_GATEWAY, stack.gateway_url), page, "exec")
        exec(code, {"__name__": "readme"})
    lines = printed.getvalue().splitlines()
    assert any(line.startswith("message ") and ANSWER in line for line in lines)
    final = lines[-2] if example else lines[-1]
    assert final.startswith("status {'status': 'succeeded'") and ANSWER in final
    if example:  # the async example ends with the newest task's status, from the list
        assert lines[-1] == "succeeded"


def test_the_mcp_example(stack: LocalStack) -> None:
    address = stack.gateway_url.removeprefix("http://")
    answered = _run(MCP.strip().replace("localhost:8000", address), stack)
    assert answered.returncode == 0, answered.stderr
    # One server-sent event: the JSON-RPC answer, the default agent (no plugin in this stack).
    data = [line for line in answered.stdout.splitlines() if line.startswith("data: ")]
    (answer,) = [json.loads(line.removeprefix("data: ")) for line in data]
    assert (answer["jsonrpc"], answer["id"]) == ("2.0", 1)
    assert [tool["name"] for tool in answer["result"]["tools"]] == ["taskyard"]


def test_every_readme_example_is_run_or_named() -> None:
    run = {SHELL, CLI, PYTHON[0][0], MCP}
    blocks = re.findall(r"```(?:python)?\n(.*?)```", README, re.DOTALL)
    others = {block.split("\n", 1)[0] for block in blocks if block not in run}
    assert others == set(NOT_RUN)
    assert len(blocks) == len(run) + len(NOT_RUN)
