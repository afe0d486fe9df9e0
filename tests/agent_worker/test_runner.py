"""The agent worker's step (services/agent_worker/runner.py) is one agent call: history in,
tokens out to `on_token`, the reply back; checked against the scripted model over HTTP."""

from __future__ import annotations

from services.agent_worker.runner import run_agent_step
from services.scripted_model import ScriptedModelThread
from shared.schema import ActionReturn, AgentMessage, AgentStatusCode
from shared.settings import Settings
from shared.spec import AgentSpec


async def test_step_loads_history_streams_tokens_and_returns_the_reply() -> None:
    spec = AgentSpec(name="solver")
    history = [
        AgentMessage(sender="user", content="What is 6 * 7?"),
        AgentMessage(
            sender="solver",
            content="",
            formatted={
                "tool_calls": [
                    {
                        "id": "c1",
                        "name": "IPythonInterpreter",
                        "parameters": {"command": "print(6 * 7)"},
                    }
                ]
            },
        ),
    ]
    result = AgentMessage(
        sender="IPythonInterpreter",
        content=ActionReturn(result=[{"type": "text", "content": "42"}]),
        extra_info={"tool_call_id": "c1"},
    )
    tokens: list[str] = []

    async def on_token(delta: str) -> None:
        tokens.append(delta)

    with ScriptedModelThread() as model:
        settings = Settings(llm_base_url=model.base_url)
        reply = await run_agent_step(
            spec, history, [result], session_id="s", task_id="t", settings=settings,
            on_token=on_token,
        )  # fmt: skip
    assert reply.sender == "solver"
    assert reply.stream_state == AgentStatusCode.END
    assert reply.content.startswith("The result is: 42")  # the model saw the tool message
    assert len(tokens) > 1
    assert "".join(tokens) == reply.content


async def test_first_step_asks_for_the_tool() -> None:
    with ScriptedModelThread() as model:
        settings = Settings(llm_base_url=model.base_url)
        reply = await run_agent_step(
            AgentSpec(), [], [AgentMessage(content="What is 2 + 3?")],
            session_id="s", task_id="t", settings=settings,
        )  # fmt: skip
    calls = reply.formatted["tool_calls"]
    assert [(c["name"], c["parameters"]) for c in calls] == [
        ("IPythonInterpreter", {"command": "print(2 + 3)\n"})
    ]
