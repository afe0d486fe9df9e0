"""What A2A costs on top of taskyard's own API: the same 2-step task (the model calls
`print(1)`, then answers; scripted model at zero latency) through `POST /v1/tasks` and its
event stream, through A2A's `SendStreamingMessage` and through a blocking `SendMessage`
(both with the a2a-sdk's client), one after the other in each round so drift hits all three.
Prints medians and p90s; asserts nothing.

    .venv/bin/python bench/a2a_bench.py [--tasks 50] [--sandbox docker|local]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable

import httpx
from a2a.client import Client, ClientConfig, create_client
from a2a.types import Message, Part, Role, SendMessageRequest, TaskState

from devstack.stack import LocalStack
from taskyard.client import AsyncTaskyardClient

TASK = "```python\nprint(1)\n```"
COMPLETED = TaskState.TASK_STATE_COMPLETED


def _message(session: str) -> SendMessageRequest:
    message = Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER,
                      parts=[Part(text=TASK)], context_id=session)  # fmt: skip
    return SendMessageRequest(message=message)


async def _rest(client: AsyncTaskyardClient) -> float:
    start = time.perf_counter()
    task = await client.submit(TASK, session_id="bench-rest")
    async for event in client.events(task["id"]):
        if event.is_final and event.data["status"] != "succeeded":
            raise RuntimeError(f"a task ended {event.data}")
    return time.perf_counter() - start


async def _a2a(client: Client, session: str) -> float:
    start = time.perf_counter()
    events = [event async for event in client.send_message(_message(session))]
    last = events[-1]
    ended = last.status_update.status if last.HasField("status_update") else last.task.status
    if ended.state != COMPLETED:
        raise RuntimeError(f"a task ended {ended}")
    return time.perf_counter() - start


def _ms(seconds: list[float]) -> str:
    ordered = sorted(seconds)
    p90 = ordered[max(int(len(ordered) * 0.9) - 1, 0)]
    return f"median {statistics.median(ordered) * 1e3:7.1f} ms   p90 {p90 * 1e3:7.1f} ms"


async def _measure(stack: LocalStack, tasks: int) -> dict[str, list[float]]:
    key = {"Authorization": f"Bearer {stack.api_key}"}
    async with (
        AsyncTaskyardClient(stack.gateway_url, stack.api_key) as rest,
        httpx.AsyncClient(headers=key, timeout=120) as http,
        httpx.AsyncClient(headers=key, timeout=120) as plain_http,
    ):
        streaming = await create_client(stack.gateway_url, ClientConfig(httpx_client=http))
        config = ClientConfig(httpx_client=plain_http, streaming=False)
        blocking = await create_client(stack.gateway_url, config)
        runs: dict[str, Callable[[], Awaitable[float]]] = {
            "REST: POST /v1/tasks + events": lambda: _rest(rest),
            "A2A: SendStreamingMessage": lambda: _a2a(streaming, "bench-stream"),
            "A2A: SendMessage (blocking)": lambda: _a2a(blocking, "bench-block"),
        }
        for run in runs.values():  # warm: each session's sandbox, connections, caches
            for _ in range(3):
                await run()
        times: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(tasks):
            for name, run in runs.items():
                times[name].append(await run())
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=50, help="tasks per way, one at a time")
    parser.add_argument("--sandbox", choices=["docker", "local"], default="docker")
    args = parser.parse_args()
    stack = LocalStack(sandbox_backend=args.sandbox).start()
    try:
        times = asyncio.run(_measure(stack, args.tasks))
    finally:
        stack.stop()
    base = statistics.median(next(iter(times.values())))
    print(f"{args.tasks} 2-step tasks per way, one at a time, {args.sandbox} sandbox")
    for name, took in times.items():
        print(f"  {name:32s} {_ms(took)}   {statistics.median(took) / base:5.2f}x")


if __name__ == "__main__":
    main()
