"""Async agents serve several sessions at once, each with its own memory, in order."""

from __future__ import annotations

import asyncio

from scripted_llm import AsyncScriptedLLM

from taskyard.agentkit.agents import AsyncAgent, AsyncStreamingAgent


async def test_three_sessions_run_concurrently_and_stay_isolated() -> None:
    # The fake model holds every call until three are in flight: serial calls would hang here.
    llm = AsyncScriptedLLM(barrier=3)
    agent = AsyncAgent(llm, name="bot")
    replies = await asyncio.wait_for(
        asyncio.gather(*(agent(f"q{n}", session_id=n) for n in range(3))), timeout=10
    )
    assert [r.content for r in replies] == ["echo: q0", "echo: q1", "echo: q2"]
    for n in range(3):
        history = agent.memory.get_memory(n)  # type: ignore[union-attr]
        assert [m.content for m in history] == [f"q{n}", f"echo: q{n}"]
    assert sorted(call.session_id for call in llm.calls) == [0, 1, 2]


async def test_three_streaming_sessions_interleave() -> None:
    llm = AsyncScriptedLLM("a b", "c d", "e f", barrier=3)
    agent = AsyncStreamingAgent(llm)

    async def run(session: int) -> list[str]:
        return [str(m.content) async for m in agent.stream("go", session_id=session)]

    streams = await asyncio.wait_for(asyncio.gather(*(run(n) for n in range(3))), timeout=10)
    assert streams == [["a", "a b", "a b"], ["c", "c d", "c d"], ["e", "e f", "e f"]]
    assert [agent.memory.get_memory(n)[-1].content for n in range(3)] == ["a b", "c d", "e f"]  # type: ignore[union-attr]
