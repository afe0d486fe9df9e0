"""`taskyard schedules ...` run as a process against the gateway as a process on the run's real
Redis: add, list, show, runs, delete, each error one line with its exit code; the async
client makes the same calls."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator

import pytest
import redis
from gateway.gateway_support import GatewayProcess

from taskyard.client import AsyncTaskyardClient, InvalidRequest, NotFound, TaskyardClient
from taskyard.client.cli import EXIT_CODES

Taskyard = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def gateway(redis_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    process = GatewayProcess(redis_server, tmp_path_factory.mktemp("gateway") / "gateway.log")
    with process as url:
        yield url


@pytest.fixture(autouse=True)
def _fresh(redis_server: str) -> None:
    for db in (0, 1):
        redis.Redis.from_url(f"{redis_server}/{db}").flushdb()


@pytest.fixture
def taskyard(gateway: str) -> Taskyard:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        cli = [sys.executable, "-m", "taskyard.client.cli"]
        argv = [*cli, "--gateway", gateway, "--api-key", "key-a"]
        return subprocess.run([*argv, *args], capture_output=True, text=True, timeout=60,
                              stdin=subprocess.DEVNULL)  # fmt: skip

    return run


def _out(result: subprocess.CompletedProcess[str]) -> list[str]:
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def _error(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.splitlines()
    return line


def test_a_schedule_is_added_listed_shown_and_deleted(taskyard: Taskyard, gateway: str) -> None:
    (added,) = _out(taskyard("schedules", "add", "0 9 * * 1-5", "summarise the news",
                             "--name", "mornings", "--missed", "skip"))  # fmt: skip
    schedule_id = added.split()[0]
    assert schedule_id.startswith("sch_") and "'0 9 * * 1-5'" in added and "mornings" in added
    assert _out(taskyard("schedules")) == [added]
    shown = _out(taskyard("schedules", "show", schedule_id))
    assert shown[1] == "  task: 'summarise the news' in a fresh session each run; missed runs: skip"
    assert _out(taskyard("schedules", "runs", schedule_id)) == []
    with TaskyardClient(gateway, "key-a") as client:
        assert client.schedule(schedule_id)["missed"] == "skip"
    assert _out(taskyard("schedules", "delete", schedule_id)) == [f"deleted {schedule_id}"]
    gone = taskyard("schedules", "show", schedule_id)
    assert gone.returncode == EXIT_CODES[NotFound] and _error(gone) == "taskyard: no such schedule"


def test_a_bad_cron_is_one_line_saying_why(taskyard: Taskyard) -> None:
    bad = taskyard("schedules", "add", "every morning", "hi")
    assert bad.returncode == EXIT_CODES[InvalidRequest]
    assert _error(bad).startswith("taskyard: body.cron: 'every morning' is not a cron expression")


async def test_the_async_client_makes_the_same_calls(gateway: str) -> None:
    async with AsyncTaskyardClient(gateway, "key-a") as client:
        made = await client.create_schedule("@hourly", "tick", session_id="hourly")
        assert made["task"]["session_id"] == "hourly" and made["missed"] == "run_once"
        assert [s["id"] for s in await client.list_schedules()] == [made["id"]]
        assert (await client.schedule(made["id"]))["cron"] == "@hourly"
        assert await client.schedule_runs(made["id"]) == []
        await client.delete_schedule(made["id"])
        assert await client.list_schedules() == []
