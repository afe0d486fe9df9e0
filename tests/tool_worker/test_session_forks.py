"""The tool worker's side of a session fork on a real Redis, without Celery, its sandbox
provider a stand-in saying what a fork did: a copied interpreter places the new session on this
worker (its record, the source's cells), each refusal becomes an answer, a request nobody waits
for any more is not served, and one for a session another live worker holds goes there."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
import redis

from services.tool_worker.call_runner import ToolCallRunner
from taskyard.plumbing import keys
from taskyard.runtime.forks import ForkReply
from taskyard.runtime.jobs import SessionForkJob
from taskyard.sandbox import InterpreterCopy, SandboxBusy, SandboxUnavailable

SOURCE, NEW = keys.session_key("t", "a"), keys.session_key("t", "b")
COPIED = InterpreterCopy(skipped={"sock": "socket cannot be copied"}, bytes=1024)


class Sandboxes:
    """What `provider.fork` does here: return `copied` (None: nothing to copy), or raise
    `error`."""

    place = None  # (what a claim asks: no interpreter is handed over here)

    def __init__(
        self, copied: InterpreterCopy | None = COPIED, error: Exception | None = None
    ) -> None:
        self.copied, self.error = copied, error
        self.forks: list[tuple[str, str]] = []

    def fork(self, source_key: str, new_key: str) -> InterpreterCopy | None:
        self.forks.append((source_key, new_key))
        if self.error is not None:
            raise self.error
        return self.copied


Serve = Callable[..., ForkReply | None]


@pytest.fixture
def serve(runner: ToolCallRunner, monkeypatch: pytest.MonkeyPatch) -> Serve:
    """Serve one fork request of session a into b with these sandboxes; the answer sent."""

    def run(sandboxes: Sandboxes, expires_in: float = 30.0) -> ForkReply | None:
        monkeypatch.setattr(runner.tools, "sandboxes", lambda: sandboxes)
        job = SessionForkJob(tenant="t", session_id="a", new_session_id="b",
                             expires_at=time.time() + expires_in)  # fmt: skip
        runner.fork_session(job)
        return runner.loop.run(runner.forks.wait(job.request_id, 0.1))

    return run


def _r(runner: ToolCallRunner) -> redis.Redis:
    return redis.Redis.from_url(runner.settings.redis_url, decode_responses=True)


def test_a_copied_interpreter_places_the_new_session_beside_the_source(
    runner: ToolCallRunner, serve: Serve
) -> None:
    _r(runner).rpush(keys.session_cells(SOURCE), "x = 41", "import math")
    sandboxes = Sandboxes()
    assert serve(sandboxes) == ForkReply(outcome="copied", skipped=COPIED.skipped)
    assert sandboxes.forks == [(SOURCE, NEW)]
    record = _r(runner).hgetall(keys.session_sandbox(NEW))
    source = _r(runner).hgetall(keys.session_sandbox(SOURCE))
    assert (record["node"], record["incarnation"], record["state"]) == (
        runner.me.node, runner.me.incarnation, "live",
    )  # fmt: skip
    assert record["queue"] == source["queue"] == runner.me.queue
    assert float(record["last_used"]) > 0  # it has state: its loss will be said
    assert _r(runner).lrange(keys.session_cells(NEW), 0, -1) == ["x = 41", "import math"]
    assert _r(runner).ttl(keys.session_sandbox(NEW)) > 0


def test_no_running_interpreter_forks_nothing_and_places_nothing(
    runner: ToolCallRunner, serve: Serve
) -> None:
    assert serve(Sandboxes(copied=None)) == ForkReply(outcome="none")
    assert not _r(runner).exists(keys.session_sandbox(NEW))


@pytest.mark.parametrize(("error", "outcome"), [
    (SandboxBusy("a cell runs in it"), "busy"),
    (SandboxUnavailable("one container per session under runsc"), "unavailable"),
])  # fmt: skip
def test_a_refused_fork_is_answered_with_why(
    runner: ToolCallRunner, serve: Serve, error: Exception, outcome: str
) -> None:
    assert serve(Sandboxes(error=error)) == ForkReply(outcome=outcome, detail=str(error))
    assert not _r(runner).exists(keys.session_sandbox(NEW))


def test_a_request_nobody_waits_for_is_not_served(runner: ToolCallRunner, serve: Serve) -> None:
    sandboxes = Sandboxes()
    assert serve(sandboxes, expires_in=-1) is None
    assert sandboxes.forks == []


def test_a_session_another_live_worker_holds_goes_there(
    runner: ToolCallRunner, serve: Serve
) -> None:
    other = keys.tool_worker_queue("other")
    _r(runner).hset(keys.session_sandbox(SOURCE), mapping={
        "node": "other", "incarnation": "run", "state": "live", "queue": other,
    })  # fmt: skip
    _r(runner).set(keys.tool_worker_alive("other"), "run", ex=60)
    sandboxes = Sandboxes()
    assert serve(sandboxes) is None
    assert sandboxes.forks == []
    broker = redis.Redis.from_url(runner.settings.broker_url)
    assert broker.llen(other) == 1
