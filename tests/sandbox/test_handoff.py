"""Handing a running sandbox from one docker provider (a tool worker stopping on purpose) to
another on the same engine: the container outlives its maker, the taker attaches to it and the
session's state comes along; what nobody takes ends with its lease."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import docker
import pytest

from taskyard.plumbing.settings import ToolWorkerSettings
from taskyard.sandbox import SandboxUnavailable
from taskyard.sandbox.base import ExecutionResult
from taskyard.sandbox.docker.provider import HANDOFF_PREFIX, OWNER_LABEL, DockerSandboxProvider
from taskyard.sandbox.provider import KernelSandboxProvider

TIMEOUT = 20.0
ROOT = Path(__file__).resolve().parents[2]
ProviderFactory = Callable[..., KernelSandboxProvider]


@pytest.fixture
def make(make_docker_provider: ProviderFactory) -> Callable[..., DockerSandboxProvider]:
    def made(**kwargs: object) -> DockerSandboxProvider:
        provider = make_docker_provider(**kwargs)
        assert isinstance(provider, DockerSandboxProvider)
        return provider

    return made


def _state(client: docker.DockerClient, container: str) -> tuple[str, str]:
    found = client.api.inspect_container(container)
    return found["Name"].lstrip("/"), found["State"]["Status"]


def test_a_handed_off_session_keeps_its_state_on_the_taker(
    docker_client: docker.DockerClient, make: Callable[..., DockerSandboxProvider]
) -> None:
    maker, taker = make(node="tools@a"), make(node="tools@b")
    maker.get("t:s").run("x = 41", TIMEOUT)
    maker.get("t:s").write_file("notes.txt", b"kept")
    handles = maker.hand_off(60)
    assert list(handles) == ["t:s"] and handles["t:s"].startswith(f"{maker.place}/")
    maker.close_all()  # the worker exits: the handed-off container stays
    container = handles["t:s"].rsplit("/", 1)[1]
    assert _state(docker_client, container) == (f"{HANDOFF_PREFIX}{container[:12]}", "running")
    assert taker.place == maker.place  # the same engine
    taker.take_over("t:s", handles["t:s"])
    result = taker.get("t:s").run("x + 1", TIMEOUT)
    assert (result.result, result.state_lost) == ("42", False)
    assert taker.get("t:s").read_file("notes.txt", 100) == b"kept"
    taker.close_all()
    with pytest.raises(docker.errors.NotFound):
        docker_client.api.inspect_container(container)


def test_busy_and_stateless_sessions_and_the_pool_are_not_handed_off(
    docker_client: docker.DockerClient, make: Callable[..., DockerSandboxProvider]
) -> None:
    maker = make(pool_size=1)
    maker.get("t:idle").run("1", TIMEOUT)
    maker.get("t:never")  # no call yet: no kernel, no state
    busy: list[ExecutionResult] = []
    cell = threading.Thread(
        target=lambda: busy.append(maker.get("t:busy").run("while True: pass", 3))
    )
    cell.start()
    while not maker.get("t:busy").cell_running:
        time.sleep(0.05)
    assert list(maker.hand_off(60)) == ["t:idle"]
    cell.join(TIMEOUT)
    assert busy[0].timed_out  # it went on here, undisturbed
    maker.close_all()
    left = docker_client.api.containers(all=True, filters={"label": f"{OWNER_LABEL}={maker.owner}"})
    assert [c["Names"][0].lstrip("/")[: len(HANDOFF_PREFIX)] for c in left] == [HANDOFF_PREFIX]


def test_a_handed_off_kernel_nobody_takes_ends_with_its_lease(
    docker_client: docker.DockerClient, make: Callable[..., DockerSandboxProvider]
) -> None:
    maker = make()
    maker.get("t:s").run("x = 1", TIMEOUT)
    handle = maker.hand_off(1.5)["t:s"]
    maker.close_all()
    container = handle.rsplit("/", 1)[1]
    deadline = time.monotonic() + 15
    while _state(docker_client, container)[1] == "running":
        assert time.monotonic() < deadline, "the kernel outlived its lease"
        time.sleep(0.2)
    taker = make()
    with pytest.raises(SandboxUnavailable, match="container had ended"):
        taker.take_over("t:s", handle)
    docker_client.api.remove_container(container, force=True)


def test_a_kernel_lives_while_its_provider_renews_its_lease(
    make: Callable[..., DockerSandboxProvider], settings: ToolWorkerSettings
) -> None:
    quick = settings.model_copy(update={"tool_worker_dead_s": 1.5, "tool_worker_beat_s": 0.3})
    provider = make(settings=quick)
    sandbox = provider.get("t:s")
    sandbox.run("x = 1", TIMEOUT)
    time.sleep(4)  # past the lease, several times renewed
    assert sandbox.run("x", TIMEOUT).result == "1"


def test_the_makers_restart_leaves_what_it_handed_off(
    docker_client: docker.DockerClient, make: Callable[..., DockerSandboxProvider]
) -> None:
    maker = make(node="tools@a")
    maker.get("t:s").run("x = 41", TIMEOUT)
    handle = maker.hand_off(60)["t:s"]
    maker.get("t:later").run("1", TIMEOUT)  # started after the hand-off: still its own
    restarted = make(node="tools@a")  # the same label and node name, a new run
    assert restarted.remove_orphans() == 1  # "t:later"'s, not the handed-off one
    taker = make(node="tools@b")
    taker.take_over("t:s", handle)
    assert taker.get("t:s").run("x + 1", TIMEOUT).result == "42"


# A taker in a process of its own: it takes the session over, answers one call, then waits
# to be killed.
_TAKER = """
import sys, time
from taskyard.plumbing.settings import ToolWorkerSettings
from taskyard.sandbox.docker.provider import DockerSandboxProvider
taker = DockerSandboxProvider(ToolWorkerSettings(), pool_size=0, node='tools@b')
taker.take_over('t:s', sys.argv[1])
print(taker.get('t:s').run('x + 1', 30).result, flush=True)
time.sleep(300)
"""


def test_a_taken_over_kernel_lives_on_its_takers_lease(
    docker_client: docker.DockerClient,
    make: Callable[..., DockerSandboxProvider],
    sandbox_image: str,
) -> None:
    # Handed over with a long lease (a planned exit gives SANDBOX_IDLE_S); once taken over, a
    # kernel lives on its taker's, so a taker killed soon after leaves nothing running long.
    maker = make(node="tools@a")
    maker.get("t:s").run("x = 41", TIMEOUT)
    handle = maker.hand_off(600)["t:s"]
    maker.close_all()
    container = handle.rsplit("/", 1)[1]
    env = {
        **os.environ,
        "TASKYARD_SANDBOX_IMAGE": sandbox_image,
        "TASKYARD_TOOL_WORKER_DEAD_S": "2",
        "TASKYARD_TOOL_WORKER_BEAT_S": "0.5",
    }
    taker = subprocess.Popen(
        [sys.executable, "-c", _TAKER, handle], cwd=ROOT, env=env, stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert taker.stdout is not None and taker.stdout.readline().strip() == "42"
    finally:
        taker.kill()
        taker.wait()
    deadline = time.monotonic() + 60  # far short of the hand-off's 600 s
    while _state(docker_client, container)[1] == "running":
        assert time.monotonic() < deadline, "the kernel kept the hand-off's lease"
        time.sleep(0.2)
    docker_client.api.remove_container(container, force=True)


def test_take_over_says_why_it_cannot(
    docker_client: docker.DockerClient, make: Callable[..., DockerSandboxProvider]
) -> None:
    taker = make()
    with pytest.raises(SandboxUnavailable, match="runs on another Docker engine"):
        taker.take_over("t:s", "docker:ANOTHER:ENGINE/0123")
    with pytest.raises(SandboxUnavailable, match="container is gone"):
        taker.take_over("t:s", f"{taker.place}/{'0' * 64}")
    assert taker.sessions() == []
