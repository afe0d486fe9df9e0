"""The session memory interface, pinned for `MemoryManager` and `RedisMemory` alike."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from taskyard.agentkit.memory import SessionMemory
from taskyard.agentkit.schema import ActionReturn, AgentMessage

MakeMemory = Callable[..., SessionMemory]


def texts(memory: SessionMemory, session_id: int | str = 0, **kw: int) -> list[object]:
    return [m.content for m in memory.get_memory(session_id, **kw)]


def test_add_keeps_order_and_turns_strings_into_user_messages(make_memory: MakeMemory) -> None:
    memory = make_memory()
    memory.add("a", session_id=1)
    memory.add([AgentMessage(sender="bot", content="b"), "c"], session_id=1)
    messages = memory.get_memory(1)
    assert [m.content for m in messages] == ["a", "b", "c"]
    assert [m.sender for m in messages] == ["user", "bot", "user"]


def test_sessions_are_isolated(make_memory: MakeMemory) -> None:
    memory = make_memory()
    memory.add("one", session_id=1)
    memory.add("two", session_id=2)
    assert texts(memory, 1) == ["one"]
    assert texts(memory, 2) == ["two"]
    assert texts(memory, 3) == []


@pytest.mark.parametrize("bad", [{"content": "x"}, 42, None, ["ok", 3]])
def test_unrecognised_input_raises_type_error_and_writes_nothing(
    make_memory: MakeMemory, bad: object
) -> None:
    memory = make_memory()
    with pytest.raises(TypeError, match="memory takes an AgentMessage"):
        memory.add(bad, session_id=1)  # type: ignore[arg-type]
    assert texts(memory, 1) == []
    assert 1 not in memory


def test_recent_n_window_per_call_and_default(make_memory: MakeMemory) -> None:
    memory = make_memory(recent_n=2)
    memory.add(["a", "b", "c", "d"])
    assert texts(memory) == ["c", "d"]
    assert texts(memory, recent_n=3) == ["b", "c", "d"]
    assert texts(memory, recent_n=0) == []
    assert texts(memory, recent_n=10) == ["a", "b", "c", "d"]


def test_delete_positions_refer_to_the_list_before_the_call(make_memory: MakeMemory) -> None:
    memory = make_memory()
    memory.add(["a", "b", "c", "d", "e"])
    memory.delete([0, 1, -1])  # Lagent would shift after each deletion and remove a, c, ...
    assert texts(memory) == ["c", "d"]
    memory.delete(0)
    assert texts(memory) == ["d"]


def test_delete_out_of_range_raises_and_keeps_everything(make_memory: MakeMemory) -> None:
    memory = make_memory()
    memory.add(["a", "b"])
    with pytest.raises(IndexError):
        memory.delete([0, 5])
    assert texts(memory) == ["a", "b"]


def test_save_is_json_and_load_round_trips_tool_results(make_memory: MakeMemory) -> None:
    memory = make_memory()
    result = ActionReturn(type="IPythonInterpreter", result=[{"type": "text", "content": "2"}])
    memory.add(
        [
            "question",
            AgentMessage(
                sender="IPythonInterpreter", content=result, extra_info={"tool_call_id": "c1"}
            ),
        ],
        session_id="s",
    )
    saved = memory.save("s")
    assert json.loads(json.dumps(saved)) == saved
    other = make_memory()
    other.load(saved, session_id="s2")
    restored = other.get_memory("s2")
    assert isinstance(restored[1].content, ActionReturn)
    assert restored == memory.get_memory("s")


def test_load_replaces_and_refuses_unknown_state(make_memory: MakeMemory) -> None:
    memory = make_memory()
    memory.add(["old"])
    memory.load([AgentMessage(content="new").model_dump(mode="json")])
    assert texts(memory) == ["new"]
    with pytest.raises(TypeError, match="memory state"):
        memory.load("not a list")
    with pytest.raises(TypeError, match="saved message"):
        memory.load([42])
    assert texts(memory) == ["new"]


def test_reset_clears_one_session_only(make_memory: MakeMemory) -> None:
    memory = make_memory()
    memory.add("x", session_id=1)
    memory.add("y", session_id=2)
    memory.reset(1)
    assert 1 not in memory
    assert texts(memory, 2) == ["y"]
