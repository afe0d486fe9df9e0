"""Every `taskyard` command on the API's resources, run as a process against the gateway as a
process on the run's real Redis (no workers: a submitted task stays queued, so it waits while
a test follows it). Each answers, fails in one line with its exit code, and Ctrl-C while
following leaves the task running (or, asked to, cancels it)."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from gateway.gateway_support import GatewayProcess

from services.tool_worker.artifacts import ArtifactKeeper
from taskyard.agentkit.schema import ActionReturn, AgentMessage, Artifact, ToolCall
from taskyard.client import (
    AsyncTaskyardClient,
    InvalidRequest,
    NotFound,
    TaskyardClient,
    Unauthorized,
)
from taskyard.client.cli import EXIT_CODES, main
from taskyard.files.artifacts import ArtifactLimits, RedisArtifactStore, artifact_name
from taskyard.plumbing import keys
from taskyard.runtime.jobs import ToolRunJob
from taskyard.runtime.store import TaskStore

NO_TASK = "task_" + "0" * 32
TASKYARD = [sys.executable, "-m", "taskyard.client.cli"]
Taskyard = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def gateway(redis_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    process = GatewayProcess(redis_server, tmp_path_factory.mktemp("gateway") / "gateway.log")
    process.env["TASKYARD_WEBHOOK_ALLOW_PRIVATE"] = "true"  # a receiver on loopback
    with process as url:
        yield url


@pytest.fixture(autouse=True)
def _fresh(redis_server: str) -> None:
    for db in (0, 1):  # the store and the broker
        redis.Redis.from_url(f"{redis_server}/{db}").flushdb()


@pytest.fixture
def client(gateway: str) -> Iterator[TaskyardClient]:
    with TaskyardClient(gateway, "key-a") as client:
        yield client


@pytest.fixture
def taskyard(gateway: str) -> Taskyard:
    """`taskyard ARGS` against the gateway, with key-a unless `key=` says otherwise."""

    def run(*args: str, key: str = "key-a") -> subprocess.CompletedProcess[str]:
        argv = [*TASKYARD, "--gateway", gateway, "--api-key", key]
        return subprocess.run([*argv, *args], capture_output=True, text=True, timeout=60,
                              stdin=subprocess.DEVNULL)  # fmt: skip

    return run


def _one_line(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.splitlines()
    return line


def _lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


# -- help -------------------------------------------------------------------------------------


def _help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 0
    return capsys.readouterr().out


def test_every_command_says_what_it_does_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    listing = _help(["--help"], capsys)
    commands = listing.splitlines()[1].strip().strip("{}").split(",")
    assert {"cancel", "sessions", "session", "delete-session", "artifacts",
            "webhook-secret", "system"} <= set(commands)  # fmt: skip
    for command in commands:
        own = _help([command, "--help"], capsys).split("\n\n")
        summary = own[1].strip()  # after the usage
        assert summary and "\n" not in summary, command
        assert summary in " ".join(listing.split()), command  # as `taskyard --help` says it


# -- tasks ------------------------------------------------------------------------------------


def test_cancel_ends_a_task_and_says_why_it_cannot(
    taskyard: Taskyard, client: TaskyardClient
) -> None:
    task_id = client.submit("wait for me")["id"]
    assert _lines(taskyard("cancel", task_id)) == [f"task {task_id} cancelled"]
    assert client.get(task_id)["status"] == "cancelled"
    again = taskyard("cancel", task_id)
    assert again.returncode == EXIT_CODES[InvalidRequest] == 5
    assert _one_line(again) == "taskyard: task already cancelled"
    unknown = taskyard("cancel", NO_TASK)
    assert unknown.returncode == EXIT_CODES[NotFound] == 4
    assert _one_line(unknown) == "taskyard: no such task"
    foreign = taskyard("cancel", client.submit("mine")["id"], key="key-b")
    assert (foreign.returncode, _one_line(foreign)) == (4, "taskyard: no such task")


def test_tasks_page_on_with_the_cursor_they_print(
    taskyard: Taskyard, client: TaskyardClient
) -> None:
    ids = [client.submit(f"task {i}")["id"] for i in range(3)]
    first = taskyard("tasks", "--limit", "2")
    assert [line.split()[0] for line in _lines(first)] == ids[:0:-1]
    hint = first.stderr.strip()
    assert hint.startswith("more: taskyard tasks --cursor ")
    rest = taskyard("tasks", "--limit", "2", *shlex.split(hint)[3:])
    assert [line.split()[0] for line in _lines(rest)] == ids[:1] and rest.stderr == ""


def test_get_and_tasks_print_the_gateways_json(taskyard: Taskyard, client: TaskyardClient) -> None:
    task_id = client.submit("as json")["id"]
    assert json.loads(taskyard("get", task_id, "--json").stdout) == client.get(task_id)
    assert json.loads(taskyard("tasks", "--json").stdout) == client.list_tasks()


def test_submit_refuses_a_busy_session_when_asked_and_takes_a_webhook(
    taskyard: Taskyard, client: TaskyardClient
) -> None:
    holder = client.submit("holds it", session_id="one-at-a-time")["id"]
    refused = taskyard("submit", "next", "--session", "one-at-a-time", "--if-busy", "reject")
    assert refused.returncode == 5
    said = f"taskyard: session one-at-a-time is running task {holder} (if_session_busy=reject)"
    assert _one_line(refused) == said
    hooked = taskyard("submit", "tell me", "--no-follow", "--webhook", "http://127.0.0.1:9/hook")
    task_id = _lines(hooked)[0].split()[1]
    assert client.get(task_id)["webhook"]["url"] == "http://127.0.0.1:9/hook"


@pytest.mark.parametrize(
    ("policy", "verb"), [("interrupt", "interrupted by"), ("rollback", "rolled back for")]
)
def test_submit_may_take_a_busy_session_now(
    taskyard: Taskyard, client: TaskyardClient, policy: str, verb: str
) -> None:
    running = client.submit("holds it", session_id=f"take-{policy}")["id"]
    taken = taskyard("submit", "mine now", "--session", f"take-{policy}", "--if-busy", policy,
                     "--no-follow")  # fmt: skip
    task_id = _lines(taken)[0].split()[1]
    assert client.get(running)["error"] == f"{verb} task {task_id}"
    assert client.session(f"take-{policy}")["running"] == task_id
    wrong = taskyard("submit", "x", "--if-busy", "later")
    assert wrong.returncode == 2 and "invalid choice: 'later'" in wrong.stderr


def test_submit_takes_a_deadline_up_to_the_tenants_maximum(
    taskyard: Taskyard, client: TaskyardClient
) -> None:
    sent = taskyard("submit", "quick", "--no-follow", "--deadline", "45",
                    "--agent", '{"max_steps": 2}')  # fmt: skip
    task = client.get(_lines(sent)[0].split()[1])
    assert task["deadline_s"] == 45 and task["deadline_at"] == task["created_at"] + 45
    over = taskyard("submit", "slow", "--no-follow", "--deadline", "5000")
    assert over.returncode == EXIT_CODES[InvalidRequest]
    said = "deadline_s 5000 is above this tenant's maximum of 3600 s"
    assert _one_line(over) == f"taskyard: body.agent.deadline_s: {said}"
    wrong = taskyard("submit", "x", "--deadline", "0")
    assert wrong.returncode == 2 and "'0' is not a number of seconds over 0" in wrong.stderr
    # The client's own argument, merged into the agent it is given.
    task_id = client.submit("quick", agent={"max_steps": 2}, deadline_s=30)["id"]
    assert client.get(task_id)["deadline_s"] == 30
    with pytest.raises(InvalidRequest, match=said):
        client.submit("slow", deadline_s=5000)


def _with_artifact(redis_server: str, task_id: str) -> str:
    """A figure of the task's, kept as the tool worker keeps it: in the (Redis) artifact store,
    and an event."""
    data = b"\x89PNG\r\n\x1a\n" + b"pixels" * 10
    name = artifact_name("figure", "image/png", data)
    asyncio.run(_keep(redis_server, task_id, data, name))
    return name


async def _keep(redis_server: str, task_id: str, data: bytes, name: str) -> None:
    store = TaskStore.from_url(f"{redis_server}/0", f"{redis_server}/1")
    artifacts = RedisArtifactStore.from_url(f"{redis_server}/0", ArtifactLimits(10**6, 10**6))
    keeper = ArtifactKeeper(artifacts, store.publish)
    call = ToolCall(id="c1", name="IPythonInterpreter", parameters={"command": "plot()"})
    job = ToolRunJob(task_id=task_id, step=0, tenant="tenant-a", session_id="s", call=call)
    made = Artifact(name=name, mime="image/png", kind="figure", size=len(data),
                    data=base64.b64encode(data).decode())  # fmt: skip
    ret = ActionReturn(type=call.name, result=[{"type": "text", "content": "ok"}], artifacts=[made])
    await keeper.keep(job, AgentMessage.tool_result(call, ret))
    await store.close()
    await artifacts.close()


def test_artifacts_are_listed_and_saved(
    taskyard: Taskyard,
    client: TaskyardClient,
    redis_server: str,
    tmp_path: Path,
) -> None:
    task_id = client.submit("plot something")["id"]
    assert _lines(taskyard("artifacts", task_id)) == []
    name = _with_artifact(redis_server, task_id)
    (line,) = _lines(taskyard("artifacts", task_id))
    assert line == f"{name}  image/png  68 bytes"
    saved = _lines(taskyard("artifacts", task_id, "--save", str(tmp_path / "out")))
    assert saved == [f"{name}  image/png  68 bytes  saved as {tmp_path / 'out' / name}"]
    assert (tmp_path / "out" / name).read_bytes().startswith(b"\x89PNG")
    assert json.loads(taskyard("artifacts", task_id, "--json").stdout) == client.artifacts(task_id)
    assert taskyard("artifacts", NO_TASK).returncode == 4


# -- sessions ---------------------------------------------------------------------------------


def _remember(redis_server: str, session: str, texts: list[str]) -> None:
    """Messages in the session's memory, named among its memories, as a step's commit does."""
    memory = keys.session_memory("tenant-a", session)
    messages = [AgentMessage(sender="user", content=t).model_dump_json() for t in texts]
    store = redis.Redis.from_url(f"{redis_server}/0")
    store.rpush(memory, *messages)
    store.sadd(keys.session_paths("tenant-a", session), memory)


def test_sessions_are_listed_most_recently_used_first(
    taskyard: Taskyard, client: TaskyardClient
) -> None:
    older = client.submit("a", session_id="older")["id"]
    newer = client.submit("b", session_id="newer")["id"]
    client.submit("c", session_id="newer")
    page = taskyard("sessions", "--limit", "1")
    (line,) = _lines(page)
    assert line.startswith("newer ")
    assert line.endswith(f"2 task(s), 0 message(s), running {newer}, 1 waiting")
    hint = page.stderr.strip()
    assert hint.startswith("more: taskyard sessions --cursor ")
    rest = taskyard("sessions", "--limit", "1", *shlex.split(hint)[3:])
    (line,) = _lines(rest)
    assert line.startswith("older ")
    assert line.endswith(f"1 task(s), 0 message(s), running {older}")
    assert rest.stderr == ""
    assert json.loads(taskyard("sessions", "--json").stdout) == client.list_sessions()
    assert _lines(taskyard("sessions", key="key-b")) == []  # another tenant's


def test_a_session_shows_its_messages_tasks_and_interpreter(
    taskyard: Taskyard, client: TaskyardClient, redis_server: str
) -> None:
    first = client.submit("a", session_id="shown")["id"]
    second = client.submit("b", session_id="shown")["id"]
    _remember(redis_server, "shown", ["hello", "again", "third"])
    shown = _lines(taskyard("session", "shown", "--offset", "1", "--limit", "2"))
    assert shown == [
        f"session shown: running {first}, 1 waiting",
        "interpreter: none",
        "memories: memory (3)",
        f"tasks, newest first: {second} {first}",
        "messages 2-3 of 3 (memory):",
        "[user]",
        "    again",
        "[user]",
        "    third",
    ]
    as_json = json.loads(taskyard("session", "shown", "--json").stdout)
    assert as_json == client.session("shown")
    unknown = taskyard("session", "never")
    assert (unknown.returncode, _one_line(unknown)) == (4, "taskyard: no such session")


def test_deleting_a_busy_session_needs_force(
    taskyard: Taskyard, client: TaskyardClient, redis_server: str
) -> None:
    running = client.submit("a", session_id="doomed")["id"]
    waiting = client.submit("b", session_id="doomed")["id"]
    _remember(redis_server, "doomed", ["forget me"])
    busy = taskyard("delete-session", "doomed")
    assert busy.returncode == EXIT_CODES[InvalidRequest] == 5
    assert (
        _one_line(busy)
        == f"taskyard: task {running} runs in this session; add --force to cancel it"
    )
    assert client.session("doomed")["total_messages"] == 1  # nothing was deleted
    assert _lines(taskyard("delete-session", "doomed", "--force")) == ["session doomed deleted"]
    assert {client.get(t)["status"] for t in (running, waiting)} == {"cancelled"}
    gone = taskyard("session", "doomed")
    assert (gone.returncode, _one_line(gone)) == (4, "taskyard: no such session")
    again = taskyard("delete-session", "doomed")
    assert (again.returncode, _one_line(again)) == (4, "taskyard: no such session")
    assert _lines(taskyard("sessions")) == []


def test_forking_a_session(taskyard: Taskyard, client: TaskyardClient, redis_server: str) -> None:
    _remember(redis_server, "a", ["hello"])
    forked = _lines(taskyard("fork-session", "a", "--as", "b"))
    assert forked == ["session b forked from a (no running interpreter to copy)"]
    assert _lines(taskyard("session", "b"))[:2] == ["session b: idle, 0 waiting", "forked from: a"]
    made = json.loads(taskyard("fork-session", "b", "--json").stdout)
    assert (made["forked_from"], made["interpreter"]) == ("b", "none")
    assert client.session(made["session_id"])["total_messages"] == 1
    taken = taskyard("fork-session", "a", "--as", "b")
    assert (taken.returncode, _one_line(taken)) == (
        5, "taskyard: session b already exists; fork into a new id",
    )  # fmt: skip
    running = client.submit("x", session_id="a")["id"]
    busy = taskyard("fork-session", "a")
    assert (busy.returncode, _one_line(busy)) == (
        5, f"taskyard: session a has task {running} queued; fork it when it ends",
    )  # fmt: skip
    unknown = taskyard("fork-session", "never")
    assert (unknown.returncode, _one_line(unknown)) == (4, "taskyard: no such session")
    assert "--as NEW" in taskyard("fork-session", "--help").stdout


async def test_the_async_twin_has_the_same_calls(gateway: str, client: TaskyardClient) -> None:
    task_id = client.submit("a", session_id="twin")["id"]
    async with AsyncTaskyardClient(gateway, "key-a") as twin:
        assert await twin.list_sessions(limit=5) == client.list_sessions(limit=5)
        assert await twin.session("twin", memory="memory") == client.session("twin")
        assert (await twin.system())["queues"] == client.system()["queues"]
        with pytest.raises(InvalidRequest, match=f"session twin is running task {task_id}"):
            await twin.submit("b", session_id="twin", if_session_busy="reject")
        taken = await twin.submit("c", session_id="twin", if_session_busy="rollback")
        assert client.get(task_id)["error"] == f"rolled back for task {taken['id']}"
        assert (await twin.cancel(taken["id"]))["status"] == "cancelled"
        forked = await twin.fork_session("twin", "twin-fork")
        assert forked == {"session_id": "twin-fork", "forked_from": "twin", "interpreter": "none",
                          "skipped": {}}  # fmt: skip
        assert client.fork_session("twin")["forked_from"] == "twin"
        await twin.delete_session("twin")
        with pytest.raises(NotFound, match="no such session"):
            await twin.session("twin")


# -- the tenant -------------------------------------------------------------------------------


def test_webhook_secret_is_the_tenants(taskyard: Taskyard, client: TaskyardClient) -> None:
    (secret,) = _lines(taskyard("webhook-secret"))
    assert secret.startswith("whsec_") and secret == client.webhook_secret()
    (theirs,) = _lines(taskyard("webhook-secret", key="key-b"))
    assert theirs.startswith("whsec_") and theirs != secret


def test_system_shows_the_queues_and_that_no_worker_answers(
    taskyard: Taskyard, client: TaskyardClient
) -> None:
    client.submit("queued for a worker")
    shown = _lines(taskyard("system"))
    assert f"queue {keys.AGENT_QUEUE}: 1 waiting" in shown
    assert "workers: none answered" in shown
    view = json.loads(taskyard("system", "--json").stdout)
    assert {"name": keys.AGENT_QUEUE, "depth": 1} in view["queues"] and view["workers"] == []


@pytest.mark.parametrize(
    "args",
    [("cancel", NO_TASK), ("sessions",), ("session", "s"), ("delete-session", "s"),
     ("artifacts", NO_TASK), ("webhook-secret",), ("system",)],
)  # fmt: skip
def test_a_bad_key_is_one_line_and_exit_3(taskyard: Taskyard, args: tuple[str, ...]) -> None:
    result = taskyard(*args, key="nope")
    assert result.returncode == EXIT_CODES[Unauthorized] == 3
    assert _one_line(result).startswith("taskyard: missing or invalid API key")


# -- Ctrl-C while following -------------------------------------------------------------------


def _interrupt(gateway: str, *args: str) -> tuple[int, str, str]:
    """Run `taskyard ARGS`, send it SIGINT once it follows the task (its first status shown),
    and return its exit code, stdout and stderr."""
    argv = [*TASKYARD, "--gateway", gateway, "--api-key", "key-a", *args]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})  # fmt: skip
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:  # the test's timeout bounds the wait
        seen.append(line)
        if line.startswith("· status: queued"):
            break
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    return proc.returncode, "".join(seen) + out, err


def _goes_on(task_id: str) -> str:
    return (
        f"taskyard: stopped following; task {task_id} goes on running on the server: "
        f"`taskyard follow {task_id}` to reattach, `taskyard cancel {task_id}` to cancel it\n"
    )


def test_ctrl_c_while_following_leaves_the_task_running(
    gateway: str, client: TaskyardClient
) -> None:
    task_id = client.submit("a long one")["id"]
    code, out, err = _interrupt(gateway, "follow", task_id)
    assert (code, err) == (130, _goes_on(task_id))
    assert "· status: queued" in out
    assert client.get(task_id)["status"] == "queued"  # still live, still to run


def test_ctrl_c_while_submitting_leaves_the_task_running(
    gateway: str, client: TaskyardClient
) -> None:
    code, out, err = _interrupt(gateway, "submit", "a long one")
    task_id = out.split()[1]
    assert (code, err) == (130, _goes_on(task_id))
    assert client.get(task_id)["status"] == "queued"


def test_ctrl_c_cancels_when_asked_to(gateway: str, client: TaskyardClient) -> None:
    code, out, err = _interrupt(gateway, "submit", "a long one", "--cancel-on-interrupt")
    task_id = out.split()[1]
    assert (code, err) == (130, f"taskyard: stopped following; task {task_id} cancelled\n")
    assert client.get(task_id)["status"] == "cancelled"
