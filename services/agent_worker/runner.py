"""One agent step is one agent call: build the spec's agent, give it the session's history,
call it on this step's inputs (streaming its text to `on_token`), return the reply.

Each worker thread runs its steps on one long-lived event loop (`StepLoop`), so the OpenAI
SDK client and its pooled connections to the proxy live across steps instead of being made
(tens of milliseconds of TLS set-up) for every one."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import aclosing
from typing import Any, TypeVar

import openai

from shared.agents import build_agent, default_llm
from shared.schema import AgentMessage, AgentStatusCode
from shared.settings import Settings
from shared.spec import AgentSpec

__all__ = ["StepLoop", "run_agent_step"]

OnToken = Callable[[str], Awaitable[None]]
T = TypeVar("T")


class StepLoop(threading.local):
    """A per-thread event loop and the SDK clients bound to it."""

    def __init__(self) -> None:
        self.runner = asyncio.Runner()
        self.clients: dict[tuple[str, str, float], openai.AsyncOpenAI] = {}

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.runner.run(coro)

    def close(self) -> None:
        """Close this thread's loop (and the generators and tasks still on it)."""
        self.runner.close()

    def client(self, settings: Settings) -> openai.AsyncOpenAI:
        key = (settings.llm_base_url, settings.llm_api_key, settings.llm_timeout_s)
        if key not in self.clients:
            self.clients[key] = openai.AsyncOpenAI(base_url=key[0], api_key=key[1], timeout=key[2])
        return self.clients[key]


async def run_agent_step(
    spec: AgentSpec,
    history: list[AgentMessage],
    inputs: list[AgentMessage],
    *,
    session_id: str,
    task_id: str,
    settings: Settings,
    client: openai.AsyncOpenAI | None = None,
    on_token: OnToken | None = None,
) -> AgentMessage:
    """Run the agent once on the session's history plus this step's inputs.

    The worker commits the inputs and the reply to Redis itself, atomically, after the call;
    the agent's own memory here lives for this step only. `client` is reused if given.
    """
    llm = default_llm(spec, settings, client)
    try:
        agent = build_agent(spec, settings, llm=llm)
        # Just the top memory (state_dict of a session this fresh agent lacks would warn).
        agent.load_state_dict({"memory": history}, session_id, strict=False)
        # Closed here, not by garbage collection: this thread's loop outlives the step.
        async with aclosing(
            agent.stream(*inputs, session_id=session_id, task_id=task_id)
        ) as stream:
            return await _reply(stream, on_token)
    finally:
        if client is None:
            await llm.close()


async def _reply(stream: AsyncIterator[AgentMessage], on_token: OnToken | None) -> AgentMessage:
    shown, reply = "", None
    async for message in stream:
        reply = message
        if on_token is not None and message.stream_state == AgentStatusCode.STREAM_ING:
            text = str(message.content)
            # Streamed messages carry the text so far; the event stream wants what is new.
            if text.startswith(shown) and len(text) > len(shown):
                await on_token(text[len(shown) :])
            shown = text
    assert reply is not None  # an agent call always ends with its reply
    return reply
