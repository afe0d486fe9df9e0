"""Tool call results in the store against a real Redis: exactly one result completes a step."""

from __future__ import annotations

from store_support import created, tool_result

from taskyard.agentkit.schema import AgentMessage, ToolCall
from taskyard.runtime.store import StepCommit, TaskStore
from taskyard.runtime.task import TaskStatus


async def test_tool_results_complete_the_step_once(store: TaskStore) -> None:
    record = await created(store)
    calls = [ToolCall(id="a", name="T"), ToolCall(id="b", name="T")]
    call_dicts = [c.model_dump(mode="json") for c in calls]
    reply = AgentMessage(sender="assistant", content="", formatted={"tool_calls": call_dicts})
    commit = StepCommit(record, TaskStatus.WAITING_TOOLS, {"memory": [reply]}, [reply],
                        fields={"pending_calls": call_dicts})  # fmt: skip
    assert (await store.commit_step(commit))[0]
    first = await store.put_tool_result(record.id, 0, "b", tool_result("b"))
    assert not first.advance
    second = await store.put_tool_result(record.id, 0, "a", tool_result("a"))
    assert second.advance
    again = await store.put_tool_result(record.id, 0, "a", tool_result("a", "other"))
    assert not again.advance  # exactly one caller advances
    looked = await store.put_tool_result(record.id, 0, "b", None)
    assert not looked.advance and looked.live  # nor does one that only looks, after it
    assert await store.tool_results(record.id, 0, calls) == [tool_result("a"), tool_result("b")]
    start = await store.begin_step(record.id, 1, "acme", "s1", {"memory": 0}, "0")
    assert start is not None and start.inputs() == [tool_result("a"), tool_result("b")]
