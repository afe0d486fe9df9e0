"""Redis fails over under load and no accepted task is lost: the stack runs on a primary, a
replica and three sentinels; tasks stream in through the gateway (each two steps: a code cell,
then an answer quoting it) while the primary is SIGKILLed and Sentinel promotes the replica.

Every 202 must end succeeded with its own cell's value, each step applied once (the transcript
and the task's event stream hold each message once); none stuck. The killed server comes back
as a replica of the new master, after which new tasks are accepted again: with one replica a
202 waits for it (docs/deployment.md), so while only one server lives the gateway answers 503
and the client sends the task again with its Idempotency-Key.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import pytest
import redis

from devstack.stack import LocalStack
from taskyard.agentkit.schema import AgentMessage
from taskyard.plumbing import keys

pytestmark = pytest.mark.e2e

TASKS = 40
SESSIONS = 10
WINDOW_S = 8.0  # submissions spread over this long
KILL_AT_S = 3.0  # the primary's SIGKILL, after the first submissions
PATIENCE_S = 60.0  # how long a submission is sent again on 503 or no answer
FILLER_MB = 32  # more than loopback's socket buffers hold
TENANT = "demo"  # the stack's key's tenant
ENDED = frozenset({"succeeded", "failed", "cancelled", "timed_out"})
_CELL = "```python\nprint('value=%d' % ({token} * 7))\n```"


@pytest.fixture(scope="module")
def stack(sandbox_image: str) -> Iterator[LocalStack]:
    # A dead worker's job (or a job whose ack the failover lost) returns after 5 s; a task
    # standing still for 3 s has what it waits on sent again by a sweep every second.
    env = {"TASKYARD_VISIBILITY_TIMEOUT_S": "5", "TASKYARD_STALL_S": "3",
           "TASKYARD_SWEEP_INTERVAL_S": "1"}  # fmt: skip
    stack = LocalStack(sandbox_backend="docker", redis_sentinel=True, extra_env=env).start()
    yield stack
    stack.stop()


@dataclass
class Submitted:
    accepted: dict[int, str] = field(default_factory=dict)  # task id by token
    answers: Counter[int] = field(default_factory=Counter)  # every answer's status (0: none)


async def _submit(stack: LocalStack, tokens: list[int], window_s: float) -> Submitted:
    out = Submitted()
    headers = {"Authorization": f"Bearer {stack.api_key}"}
    start = time.monotonic()
    async with httpx.AsyncClient(base_url=stack.gateway_url, headers=headers, timeout=30) as http:

        async def one(index: int, token: int) -> None:
            await asyncio.sleep(max(0.0, start + index * window_s / len(tokens) - time.monotonic()))
            body = {"input": _CELL.format(token=token), "session_id": f"s{token % SESSIONS}"}
            give_up = time.monotonic() + PATIENCE_S
            while time.monotonic() < give_up:
                try:
                    resp = await http.post("/v1/tasks", json=body,
                                           headers={"Idempotency-Key": f"t{token}"})  # fmt: skip
                    status = resp.status_code
                except httpx.TransportError:
                    status = 0
                out.answers[status] += 1
                if status == 202:
                    out.accepted[token] = resp.json()["id"]
                    return
                assert status in (0, 503), resp.text  # only "not now" answers are retried
                await asyncio.sleep(0.5)

        await asyncio.gather(*(one(i, token) for i, token in enumerate(tokens)))
    return out


def _fail_over(stack: LocalStack) -> float:
    """SIGKILL the primary at KILL_AT_S; until the replica is promoted, in seconds."""
    time.sleep(KILL_AT_S)
    stack.kill("redis")
    killed = time.monotonic()
    assert stack.sentinels is not None
    stack.sentinels.wait_promoted(stack.ports.redis)
    return time.monotonic() - killed


def _wait_ended(stack: LocalStack, ids: list[str], timeout_s: float) -> dict[str, str | None]:
    deadline = time.monotonic() + timeout_s
    with redis.Redis.from_url(f"{stack.master_url}/0", decode_responses=True) as client:
        while True:
            statuses = {i: client.hget(keys.task(i), "status") for i in ids}
            ended = all(s is None or s in ENDED for s in statuses.values())
            if ended or time.monotonic() > deadline:
                return statuses
            time.sleep(0.2)


def _message_events(stack: LocalStack, task_id: str) -> int:
    with redis.Redis.from_url(f"{stack.master_url}/0", decode_responses=True) as client:
        entries = client.xrange(keys.task_events(task_id))
    return sum(1 for _, entry in entries if entry["kind"] == "message")


async def _run(stack: LocalStack) -> tuple[Submitted, float]:
    tokens = list(range(1000, 1000 + TASKS))
    submitting = asyncio.create_task(_submit(stack, tokens, WINDOW_S))
    promoted_s = await asyncio.to_thread(_fail_over, stack)
    # The killed server comes back (its old data is replaced) as the new master's replica.
    await asyncio.to_thread(stack.restart, "redis")
    return await submitting, promoted_s


def test_a_failover_loses_no_accepted_task(stack: LocalStack) -> None:
    submitted, promoted_s = asyncio.run(_run(stack))
    assert promoted_s < 15
    assert sorted(submitted.accepted) == list(range(1000, 1000 + TASKS))  # each sent again
    assert submitted.answers[503] + submitted.answers[0] > 0  # the failover hit mid-stream
    statuses = _wait_ended(stack, list(submitted.accepted.values()), timeout_s=60)
    headers = {"Authorization": f"Bearer {stack.api_key}"}
    with httpx.Client(base_url=stack.gateway_url, headers=headers, timeout=30) as http:
        for token, task_id in submitted.accepted.items():
            assert statuses[task_id] == "succeeded", (task_id, statuses[task_id])
            task = http.get(f"/v1/tasks/{task_id}").raise_for_status().json()
            assert f"value={token * 7}" in task["result"]
            kinds = [_kind(message) for message in task["messages"]]
            assert kinds == ["user", "call", "result", "answer"], (task_id, kinds)
            assert _message_events(stack, task_id) == 4, task_id
        # Accepted again, now that the new master has a replica: at once, or after a few 503s
        # while the returning server resynchronises.
        after = asyncio.run(_submit(stack, [5000, 5001], 0.0))
        assert sorted(after.accepted) == [5000, 5001]
        ended = _wait_ended(stack, list(after.accepted.values()), timeout_s=30)
        assert set(ended.values()) == {"succeeded"}


def _kind(raw: dict) -> str:
    message = AgentMessage.model_validate(raw)
    if message.sender == "user":
        return "user"
    if message.tool_call_id is not None:
        return "result"
    return "call" if message.tool_calls else "answer"


def test_no_202_while_the_replica_lags_so_the_failover_loses_none(stack: LocalStack) -> None:
    """The promise itself. The replica stalls (SIGSTOP) behind more writes than the sockets
    between it and the master hold, so the master's last writes wait in its output buffer;
    a task submitted then is written to the master only, and the gateway answers 503, not
    202. The master dies (SIGKILL): its last writes, the task among them, are gone from the
    promoted replica, so a 202 would have been a lost task. Sent again with its key, the task
    is accepted once and runs."""
    master, replica = _roles(stack)
    body = {"input": _CELL.format(token=7000), "session_id": f"s{7000 % SESSIONS}"}
    headers = {"Authorization": f"Bearer {stack.api_key}", "Idempotency-Key": "t7000"}
    with (
        httpx.Client(base_url=stack.gateway_url, headers=headers, timeout=30) as http,
        redis.Redis.from_url(f"{stack.master_url}/3") as direct,
    ):
        os.killpg(stack.procs[replica].pid, signal.SIGSTOP)
        try:
            for _ in range(FILLER_MB):
                direct.append("filler", b"x" * 1_000_000)
            refused = http.post("/v1/tasks", json=body)
            stack.kill(master)
        finally:
            os.killpg(stack.procs[replica].pid, signal.SIGCONT)
    assert refused.status_code == 503, refused.text
    assert stack.sentinels is not None
    stack.sentinels.wait_promoted(_port(stack, master))
    with redis.Redis.from_url(f"{stack.master_url}/3") as promoted:
        assert promoted.strlen("filler") < FILLER_MB * 1_000_000  # the last writes are gone
        promoted.delete("filler")
    with redis.Redis.from_url(f"{stack.master_url}/0") as promoted:
        assert not promoted.exists(keys.idempotency(TENANT, "t7000"))  # the task with them
    stack.restart(master)  # back, as the new master's replica
    accepted = asyncio.run(_submit(stack, [7000], 0.0)).accepted
    ended = _wait_ended(stack, [accepted[7000]], timeout_s=30)
    assert ended == {accepted[7000]: "succeeded"}


def _roles(stack: LocalStack) -> tuple[str, str]:
    """The names of the processes that are the master and the replica now."""
    names = ("redis", "redis_replica")
    master = next(name for name in names if stack.master_url.endswith(f":{_port(stack, name)}"))
    return master, next(name for name in names if name != master)


def _port(stack: LocalStack, name: str) -> int:
    assert stack.sentinels is not None
    return stack.ports.redis if name == "redis" else stack.sentinels.replica_port
