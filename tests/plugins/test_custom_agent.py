"""The custom agent example in process, against the scripted model over real HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from devstack.scripted_model import ScriptedModelThread
from examples.custom_action import UnitConverter
from examples.custom_agent import EXAMPLES, SIGNATURE, FewShotToolAggregator, UnitExpert
from taskyard.agentkit.actions import AsyncActionExecutor
from taskyard.agentkit.llms import AsyncOpenAIChat
from taskyard.agentkit.schema import ActionReturn, AgentMessage, ToolCall

CALL = {
    "name": "UnitConverter.length",
    "arguments": {"value": 5, "from_unit": "km", "to_unit": "mi"},
}
QUESTION = f"5 km in miles?\n```tool\n{json.dumps(CALL)}\n```"


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with ScriptedModelThread() as model:
        yield model.server.base_url


async def test_unit_expert_calls_its_tool_then_signs_the_answer(base_url: str) -> None:
    llm = AsyncOpenAIChat(base_url=base_url, model="scripted")
    agent = UnitExpert(llm)
    executor = AsyncActionExecutor([UnitConverter()])
    turn = await agent(AgentMessage(content=QUESTION), session_id="s")
    call = ToolCall.model_validate(turn.formatted["tool_calls"][0])
    assert call.name == "UnitConverter.length"
    result = await executor(call, session_id="s")
    assert result.extra_info == {"tool_call_id": call.id}
    answer = await agent(result, session_id="s")
    assert "3.10686 mi" in answer.content and answer.content.endswith(SIGNATURE)
    await llm.close()


def test_few_shot_examples_follow_the_system_prompt() -> None:
    chat = FewShotToolAggregator(EXAMPLES).aggregate(
        [AgentMessage(content="hi")], "unit_expert", None, "sys"
    )
    assert chat == [
        {"role": "system", "content": "sys"},
        *EXAMPLES,
        {"role": "user", "content": "hi"},
    ]


def test_few_shot_tool_aggregator_keeps_native_tool_messages() -> None:
    call = {"id": "c1", "name": "UnitConverter.length", "parameters": {"value": 1}}
    turn = AgentMessage(sender="unit_expert", content="", formatted={"tool_calls": [call]})
    ret = ActionReturn(result=[{"type": "text", "content": "1 km = 0.621371 mi"}])
    result = AgentMessage(sender="UnitConverter", content=ret, extra_info={"tool_call_id": "c1"})
    chat = FewShotToolAggregator(EXAMPLES).aggregate(
        [AgentMessage(content="1 km?"), turn, result], "unit_expert"
    )
    assert chat[: len(EXAMPLES)] == EXAMPLES
    assert chat[-2]["tool_calls"][0]["id"] == "c1"
    assert chat[-1] == {"role": "tool", "tool_call_id": "c1", "content": "1 km = 0.621371 mi"}
