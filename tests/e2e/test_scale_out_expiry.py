"""With two tool workers, an interpreter that expired idle on one says so on the next call,
wherever that call runs: the expiry is recorded with the session, not kept by the worker."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from e2e_support import cell_output

from devstack.stack import LocalStack
from taskyard.client import TaskyardClient

pytestmark = pytest.mark.e2e

IDLE_S = 2


@pytest.fixture(scope="module")
def stack(sandbox_image: str) -> Iterator[LocalStack]:
    env = {"TASKYARD_SANDBOX_IDLE_S": str(IDLE_S), "TASKYARD_SANDBOX_WARM_POOL": "0"}
    stack = LocalStack(sandbox_backend="docker", tool_workers=2, extra_env=env).start()
    yield stack
    stack.stop()


def test_an_expired_interpreter_says_so_wherever_the_next_call_runs(
    client: TaskyardClient,
) -> None:
    assert cell_output(client, "x = 5\nprint(x)", "expiring").strip() == "5"
    deadline = time.monotonic() + 30
    while (interpreter := client.session("expiring", limit=1)["interpreter"])["alive"]:
        assert time.monotonic() < deadline, "the idle interpreter was never reaped"
        time.sleep(0.2)
    assert interpreter["lost"] == f"session expired: idle for over {IDLE_S:g} s"
    after = cell_output(client, "print(globals().get('x'))", "expiring")
    assert f"Note: state lost (session expired: idle for over {IDLE_S:g} s)" in after
    assert after.strip().endswith("None")
    # Told once: the next call is plain again.
    assert cell_output(client, "print(1)", "expiring").strip() == "1"
