"""Step cost along a long workflow: a step at position 200 of a task, or in a session holding
1,000 messages, against a step at position 1.

The agent step runs in process (the agent worker's own `StepRunner`, warm agents, a real
Redis, the scripted model over HTTP); the tool results are written straight to the store, so
only the step is timed. The model's own share (the HTTP exchange with the scripted model,
which parses the whole prompt) is timed inside each step and left out.
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import redis

from devstack.scripted_model import ScriptedModelThread
from devstack.stack import LocalStack
from services.agent_worker.live_agents import LiveAgents
from services.agent_worker.step import StepRunner
from taskyard.agentkit.agents import AsyncAgent, build_agent
from taskyard.agentkit.llms import AsyncOpenAIChat
from taskyard.agentkit.schema import ActionReturn, AgentMessage
from taskyard.agentkit.spec import AgentSpec
from taskyard.plumbing import keys
from taskyard.plumbing.celery_app import make_celery
from taskyard.plumbing.settings import AgentWorkerSettings
from taskyard.runtime.cancel import CancelWatch
from taskyard.runtime.jobs import AgentStepJob
from taskyard.runtime.store import TaskStore
from taskyard.runtime.task import TaskRecord

__all__ = ["long_section"]

POSITIONS = (1, 50, 200)


class _TimedChat(AsyncOpenAIChat):
    """The model client, timing each exchange: from the request sent to the stream's end."""

    exchanges: list[float] = []

    async def _open(self, body: bytes, headers: dict[str, str]) -> Any:
        self._sent = time.perf_counter()
        return await super()._open(body, headers)

    async def stream_chat(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        async for item in super().stream_chat(*args, **kwargs):
            yield item
        self.exchanges.append(time.perf_counter() - self._sent)


class _Bench:
    def __init__(self, redis_url: str, model_url: str) -> None:
        self.settings = AgentWorkerSettings(llm_base_url=model_url, redis_url=f"{redis_url}/0",
                                 broker_url=f"{redis_url}/1", default_max_steps=1000)  # fmt: skip
        self.redis = redis.Redis.from_url(self.settings.redis_url)

    async def __aenter__(self) -> _Bench:
        self.store = TaskStore.from_url(self.settings.redis_url, self.settings.broker_url)
        self.http = aiohttp.ClientSession()
        agents = LiveAgents(self._build)
        self.runner = StepRunner(self.store, self.settings, agents, CancelWatch(self.store.r),
                                 make_celery(self.settings))  # fmt: skip
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.http.close()
        await self.store.close()

    def _build(self, spec: AgentSpec) -> AsyncAgent:
        model = spec.model or self.settings.default_model
        llm = _TimedChat(self.settings.llm_base_url, model, session=self.http)
        return build_agent(spec, self.settings, llm=llm)

    async def step(self, record: TaskRecord, step: int) -> float:
        """One step's own cost: its time less the model's HTTP exchange."""
        before = len(_TimedChat.exchanges)
        start = time.perf_counter()
        await self.runner.run(AgentStepJob(task_id=record.id, step=step, tenant=record.tenant,
                                           session_id=record.session_id))  # fmt: skip
        took = time.perf_counter() - start
        return took - sum(_TimedChat.exchanges[before:])

    async def answer(self, record: TaskRecord, step: int) -> None:
        """The tool result of the step's call, as a tool worker would store it."""
        task = await self.store.get(record.id)
        assert task is not None and task.pending_calls, task
        call = task.pending_calls[0]
        ret = ActionReturn(type=call.name, result=[{"type": "text", "content": "1"}])
        await self.store.put_tool_result(record.id, step, call.id,
                                         AgentMessage.tool_result(call, ret))  # fmt: skip

    async def long_task(self, session: str, steps: int) -> list[float]:
        text = f"```python\nprint(1)\n```\nrepeat {steps} times"
        record = TaskRecord(tenant="t", session_id=session, input=text)
        await self.store.create(record)
        costs = []
        for step in range(steps + 1):
            costs.append(await self.step(record, step))
            if step < steps:
                await self.answer(record, step)
        return costs

    async def in_session(self, session: str, messages: int) -> tuple[float, float]:
        """A one-step task's cost in a session of `messages` messages: first (the worker
        loads the session) and second (warm)."""
        text = "word " * 20
        history = [AgentMessage(sender="assistant" if i % 2 else "user", content=f"{i} {text}")
                   for i in range(messages)]  # fmt: skip
        if history:
            memory = keys.session_memory("t", session)
            self.redis.rpush(memory, *(m.model_dump_json() for m in history))
        costs = []
        for _ in range(2):
            record = TaskRecord(tenant="t", session_id=session, input="hello",
                                spec=AgentSpec(tools=[]))  # fmt: skip
            await self.store.create(record)
            costs.append(await self.step(record, 0))
        return costs[0], costs[1]


async def _measure(redis_url: str, model_url: str, runs: int) -> dict[str, Any]:
    async with _Bench(redis_url, model_url) as bench:
        await bench.long_task("warm-up", 3)  # the agent is built and the code paths warm
        tasks = [await bench.long_task(f"long-{i}", max(POSITIONS)) for i in range(runs)]
        sessions = [await bench.in_session(f"big-{i}", 1000) for i in range(runs)]
        empty = [await bench.in_session(f"empty-{i}", 0) for i in range(runs)]
    at = {p: statistics.median(t[p - 1] for t in tasks) for p in POSITIONS}
    return {"at": at, "big": [statistics.median(s[i] for s in sessions) for i in (0, 1)],
            "empty": statistics.median(e[1] for e in empty)}  # fmt: skip


def long_section(quick: bool) -> None:
    stack = LocalStack()  # only for its Redis command line and port
    argv = stack.commands()["redis"]
    server = subprocess.Popen(argv, stdout=subprocess.DEVNULL, start_new_session=True)
    try:
        time.sleep(0.5)
        with ScriptedModelThread() as model:
            result = asyncio.run(_measure(stack.redis_url, model.base_url, 2 if quick else 5))
    finally:
        server.terminate()
        server.wait(timeout=10)
    at, first = result["at"], result["at"][1]
    print("\n## Long workflow: one step's own cost (model exchange left out), medians")
    print("| where | step cost | vs position 1 |")
    print("| --- | --- | --- |")
    for position in POSITIONS:
        print(f"| position {position} of a task | {at[position] * 1e3:.2f} ms | "
              f"{at[position] / first:.2f}x |")  # fmt: skip
    empty, (cold, warm) = result["empty"], result["big"]
    print(f"| first step in an empty session | {empty * 1e3:.2f} ms | |")
    print(f"| session of 1,000 messages, worker cold | {cold * 1e3:.2f} ms | "
          f"{cold / empty:.2f}x empty |")  # fmt: skip
    print(f"| session of 1,000 messages, warm | {warm * 1e3:.2f} ms | {warm / empty:.2f}x empty |")
