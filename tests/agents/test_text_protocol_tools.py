"""An agent on a text tool protocol (InternLM's plugin markers) with an executor: a call the
model broke is answered with the error, and not shown back to the model on its next turn."""

from __future__ import annotations

from scripted_llm import scripted

from taskyard.agentkit.actions import ActionExecutor, BaseAction, InternLMActionProcessor
from taskyard.agentkit.agents import Agent
from taskyard.agentkit.aggregators import InternLMToolAggregator
from taskyard.agentkit.parsers import PluginParser

BEGIN, END = "<|action_start|><|plugin|>\n", "<|action_end|>\n"
CALL = '{"name": "Echo", "parameters": {"text": "hi"}}'
BROKEN = f'Let me try.{BEGIN}{{"name": "Echo", "parameters": {END}'


class Echo(BaseAction):
    """Say the text back."""

    def run(self, text: str) -> str:
        return text


def test_an_agent_with_a_broken_call_is_not_shown_it_on_the_next_turn() -> None:
    llm = scripted(BROKEN, f"{BEGIN}{CALL}{END}", "Done: hi")
    agent = Agent(
        llm, name="bot", output_format=PluginParser(), aggregator=InternLMToolAggregator()
    )
    executor = ActionExecutor([Echo()], hooks=[InternLMActionProcessor()])
    reply = agent("say hi", session_id=1)
    for _ in range(2):
        reply = agent(executor(reply, "1"), session_id=1)
    assert reply.content == "Done: hi"
    retry, answer = llm.calls[1].messages, llm.calls[2].messages
    assert [m["role"] for m in retry] == ["user", "environment"]
    assert "no tool call to run" in retry[1]["content"]
    assert all("Let me try." not in m["content"] for m in retry + answer)
    assert answer[-1] == {"role": "environment", "name": "plugin", "content": "hi"}
