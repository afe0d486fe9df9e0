"""The tool worker's sandboxes: at start-up it removes what an earlier run under its label
left, checks that its backend runs, and exits at once with the reason when it does not; a
session's running call can be interrupted from another thread."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
from docker.errors import NotFound
from docker.models.containers import Container

from services.tool_worker.toolbox import Toolbox
from taskyard.agentkit.schema import ActionReturn, AgentMessage, ToolCall
from taskyard.plumbing.settings import ToolWorkerSettings
from taskyard.sandbox import SandboxUnavailable
from taskyard.sandbox.docker.provider import NODE_LABEL, WORKER_LABEL

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def label() -> str:
    return f"startup-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def toolboxes() -> Iterator[list[Toolbox]]:
    made: list[Toolbox] = []
    yield made
    for toolbox in made:
        toolbox.close()


def test_start_removes_what_an_earlier_run_left(
    sandbox_image: str, label: str, toolboxes: list[Toolbox]
) -> None:
    engine = docker.from_env()

    def left_by(node: str) -> Container:
        # What a worker killed mid-cell could leave: running, under its label and node name.
        return engine.containers.run(
            sandbox_image, entrypoint=["sleep", "60"], network_mode="none", detach=True,
            labels={WORKER_LABEL: label, NODE_LABEL: node},
        )  # fmt: skip

    stray, neighbours = left_by("tools@h"), left_by("tools2@h")
    try:
        settings = ToolWorkerSettings(sandbox_image=sandbox_image, sandbox_worker_label=label)
        toolboxes.append(Toolbox(settings))
        assert toolboxes[0].start("tools@h") == 1
        with pytest.raises(NotFound):
            stray.reload()
        neighbours.reload()  # another worker's, on the same engine under the same label
        assert neighbours.status == "running"
    finally:
        for container in (stray, neighbours):
            with contextlib.suppress(NotFound):
                container.remove(force=True)
        engine.close()


def test_start_says_why_the_sandbox_cannot_run(label: str, toolboxes: list[Toolbox]) -> None:
    settings = ToolWorkerSettings(
        sandbox_image="taskyard/no-such-image:x", sandbox_worker_label=label
    )
    toolboxes.append(Toolbox(settings))
    with pytest.raises(SandboxUnavailable, match="taskyard/no-such-image:x"):
        toolboxes[0].start()


def test_a_worker_whose_sandbox_cannot_run_exits_at_start(redis_server: str, label: str) -> None:
    env = {
        **os.environ,
        "TASKYARD_REDIS_URL": f"{redis_server}/0",
        "TASKYARD_BROKER_URL": f"{redis_server}/1",
        "TASKYARD_RESULT_BACKEND": f"{redis_server}/2",
        "TASKYARD_SANDBOX_IMAGE": "taskyard/no-such-image:x",
        "TASKYARD_SANDBOX_WORKER_LABEL": label,
    }
    argv = [sys.executable, "-m", "celery", "-A", "services.tool_worker.worker", "worker"]
    argv += ["-Q", "tools.IPythonInterpreter", "--pool", "threads", "-c", "1", "-n", f"{label}@%h"]
    worker = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert worker.returncode != 0
    output = worker.stdout + worker.stderr
    assert "sandbox backend cannot run here" in output and "no-such-image" in output
    assert "ready." not in output  # it never took a job


def test_a_worker_whose_runtime_is_missing_exits_at_start_saying_so(
    redis_server: str, label: str
) -> None:
    env = {
        **os.environ,
        "TASKYARD_REDIS_URL": f"{redis_server}/0",
        "TASKYARD_BROKER_URL": f"{redis_server}/1",
        "TASKYARD_RESULT_BACKEND": f"{redis_server}/2",
        "TASKYARD_SANDBOX_RUNTIME": "runsc-absent",
        "TASKYARD_SANDBOX_WORKER_LABEL": label,
        "TASKYARD_SANDBOX_WARM_POOL": "0",
    }
    argv = [sys.executable, "-m", "celery", "-A", "services.tool_worker.worker", "worker"]
    argv += ["-Q", "tools.IPythonInterpreter", "--pool", "threads", "-c", "1", "-n", f"{label}@%h"]
    worker = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert worker.returncode != 0
    output = worker.stdout + worker.stderr
    assert "the Docker engine has no runtime 'runsc-absent'" in output
    assert "apt-get install runsc" in output and "ready." not in output


def test_interrupt_stops_a_sessions_running_call(label: str, toolboxes: list[Toolbox]) -> None:
    settings = ToolWorkerSettings(
        sandbox_backend="local", sandbox_warm_pool=0, sandbox_worker_label=label
    )
    toolbox = Toolbox(settings)
    toolboxes.append(toolbox)
    assert not toolbox.interrupt("demo:s1")  # nothing runs yet
    call = ToolCall(id="c1", name="IPythonInterpreter", parameters={"command": "while True: pass"})
    replies: list[AgentMessage] = []
    worker = threading.Thread(target=lambda: replies.append(toolbox.run(call, "demo:s1")))
    worker.start()
    deadline = time.monotonic() + 20
    while not toolbox.interrupt("demo:s1"):
        assert time.monotonic() < deadline, "the call never started"
        time.sleep(0.01)
    worker.join(20)
    ret = replies[0].content
    assert isinstance(ret, ActionReturn) and (ret.errmsg or "").startswith("Cancelled")
