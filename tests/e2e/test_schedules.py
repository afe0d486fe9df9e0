"""Schedules through the real stack, driven by Celery beat: a schedule's runs each submit a
task that runs, and run times missed while beat was down (killed, then started again) follow
the schedule's `missed` policy: one late run (`run_once`) or none (`skip`)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from e2e_support import wait_status

from devstack.stack import LocalStack
from taskyard.client import TaskyardClient

pytestmark = pytest.mark.e2e

GRACE_S = 2.0
FIRST_RUN_IN_S = 3  # time to create both schedules before their first run time
NO_TOOLS = {"tools": []}


@pytest.fixture(scope="module")
def stack(sandbox_image: str) -> Iterator[LocalStack]:
    # Beat ticks twice a second; a cron may fire every second (six fields, seconds last); a run
    # time more than GRACE_S old when its tick comes was missed.
    env = {"TASKYARD_SCHEDULE_TICK_S": "0.5", "TASKYARD_SCHEDULE_MIN_INTERVAL_S": "1",
           "TASKYARD_SCHEDULE_GRACE_S": str(GRACE_S)}  # fmt: skip
    stack = LocalStack(sandbox_backend="docker", extra_env=env).start()
    yield stack
    stack.stop()


def _runs_until(client: TaskyardClient, schedule_id: str, count: int, timeout: float = 60) -> list:
    """The schedule's runs, oldest first, once it has `count` of them."""
    deadline = time.monotonic() + timeout
    while len(runs := client.schedule_runs(schedule_id, 500)) < count:
        assert time.monotonic() < deadline, f"{schedule_id} made {len(runs)} runs, not {count}"
        time.sleep(0.2)
    return list(reversed(runs))


def test_beat_runs_a_schedule_each_run_a_task_in_a_fresh_session(client: TaskyardClient) -> None:
    made = client.create_schedule("* * * * * */2", "ping", agent=NO_TOOLS, name="every 2 s")
    runs = _runs_until(client, made["id"], 2)
    client.delete_schedule(made["id"])
    assert [r["outcome"] for r in runs[:2]] == ["submitted", "submitted"]
    assert runs[1]["fire_at"] - runs[0]["fire_at"] >= 2  # one run per run time
    tasks = [wait_status(client, r["task_id"]) for r in runs[:2]]
    assert [t["status"] for t in tasks] == ["succeeded", "succeeded"]
    assert all("You said: ping" in (t["result"] or "") for t in tasks)
    assert tasks[0]["session_id"] != tasks[1]["session_id"]
    assert made["id"] not in [s["id"] for s in client.list_schedules()]


def _every_30_s_from_soon() -> str:
    """A cron firing every 30 s whose first run time is a few seconds away (not up to 30)."""
    return f"* * * * * {(int(time.time()) + FIRST_RUN_IN_S) % 30}/30"


@pytest.mark.timeout(300)  # a first run, then beat down past the next one (30 s later)
def test_runs_missed_while_beat_was_down_follow_each_schedules_policy(
    stack: LocalStack, client: TaskyardClient
) -> None:
    every_30_s = _every_30_s_from_soon()
    once = client.create_schedule(every_30_s, "once", agent=NO_TOOLS, missed="run_once")
    skip = client.create_schedule(every_30_s, "skip", agent=NO_TOOLS, missed="skip")
    for schedule in (once, skip):
        _runs_until(client, schedule["id"], 1)
    stack.kill("beat")
    time.sleep(1)  # a tick sent just before is done (or expired) by now
    before = {s["id"]: len(client.schedule_runs(s["id"], 500)) for s in (once, skip)}
    due = client.schedule(once["id"])["next_run_at"]
    assert client.schedule(skip["id"])["next_run_at"] == due
    # Down past the run time and its grace (but not to the next run time), then up again.
    time.sleep(max(0.0, due + GRACE_S + 2 - time.time()))
    stack.restart("beat")
    late_once = _runs_until(client, once["id"], before[once["id"]] + 1)[before[once["id"]]]
    late_skip = _runs_until(client, skip["id"], before[skip["id"]] + 1)[before[skip["id"]]]
    counts = client.schedule(skip["id"])  # read before its next run time (due + 30) comes
    assert counts["missed_runs"] == 1 and counts["next_run_at"] == due + 30
    assert late_once["fire_at"] == late_skip["fire_at"] == due
    assert late_once["late"] and late_once["outcome"] == "submitted" and late_once["missed"] == 0
    assert late_skip["late"] and late_skip["outcome"] == "skipped" and late_skip["missed"] == 1
    assert late_skip["task_id"] is None
    assert wait_status(client, late_once["task_id"])["status"] == "succeeded"
    for schedule in (once, skip):
        client.delete_schedule(schedule["id"])
