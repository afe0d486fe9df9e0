"""End to end: the tool worker's warm pool sizes itself to a burst of new sessions. Eight
tasks in new sessions at once through the gateway all succeed, and the pool, kept at one
kernel while quiet, then holds more started containers waiting for the next sessions. (How
fast a session gets its kernel is measured by `make bench`, never asserted here.)"""

from __future__ import annotations

import time
from collections.abc import Iterator

import docker
import pytest
from e2e_support import wait_status

from devstack.stack import LocalStack
from taskyard.client import TaskyardClient
from taskyard.sandbox.docker.provider import SESSION_LABEL, WORKER_LABEL

pytestmark = pytest.mark.e2e

BURST = 8


@pytest.fixture(scope="module")
def stack(sandbox_image: str) -> Iterator[LocalStack]:
    env = {"TASKYARD_SANDBOX_WARM_POOL": "1", "TASKYARD_SANDBOX_WARM_POOL_MAX": "12"}
    stack = LocalStack(tool_concurrency=BURST, extra_env=env).start()
    yield stack
    stack.stop()


def _warm(engine: docker.DockerClient, stack: LocalStack) -> int:
    """Started containers of this stack's tool worker that no session holds yet."""
    label = stack.env()["TASKYARD_SANDBOX_WORKER_LABEL"]
    running = engine.containers.list(filters={"label": f"{WORKER_LABEL}={label}"})
    return sum(c.labels.get(SESSION_LABEL) == "" for c in running)


def test_a_burst_of_new_sessions_grows_the_pool(stack: LocalStack) -> None:
    engine = docker.from_env()
    client = TaskyardClient(stack.gateway_url, stack.api_key)
    try:
        deadline = time.monotonic() + 30
        while _warm(engine, stack) != 1:  # quiet: the minimum
            assert time.monotonic() < deadline, "the pool never held its one kernel"
            time.sleep(0.2)
        ids = [client.submit("```python\nprint(1)\n```", session_id=f"burst-{n}")["id"]
               for n in range(BURST)]  # fmt: skip
        assert all(wait_status(client, i)["status"] == "succeeded" for i in ids)
        deadline = time.monotonic() + 60
        while (warm := _warm(engine, stack)) < 2:
            assert time.monotonic() < deadline, f"the pool stayed at {warm} after the burst"
            time.sleep(0.2)
    finally:
        client.close()
        engine.close()
