"""A ```tool fence in the user's message scripts a call of any offered tool."""

from __future__ import annotations

import json

from devstack.scripted_model.script import chat_turn

_CONVERTER = [{"type": "function", "function": {"name": "UnitConverter.length"}}]


def _user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def test_fenced_call_of_an_offered_tool_is_made_verbatim() -> None:
    args = {"value": 5, "from_unit": "km", "to_unit": "mi"}
    text = (
        f"convert\n```tool\n{json.dumps({'name': 'UnitConverter.length', 'arguments': args})}\n```"
    )
    turn = chat_turn(_user(text), _CONVERTER)
    assert turn.tool_call is not None
    assert turn.tool_call.name == "UnitConverter.length"
    assert json.loads(turn.tool_call.arguments) == args


def test_fence_naming_a_tool_not_offered_is_ignored() -> None:
    text = '```tool\n{"name": "Missing", "arguments": {}}\n```'
    turn = chat_turn(_user(text), _CONVERTER)
    assert turn.tool_call is None and "scripted" in turn.text


def test_fence_with_bad_json_is_ignored() -> None:
    turn = chat_turn(_user("```tool\n{not json\n```"), _CONVERTER)
    assert turn.tool_call is None


def test_repeat_n_times_calls_the_code_tool_n_times_then_answers() -> None:
    tools = [{"type": "function", "function": {"name": "IPythonInterpreter"}}]
    chat = _user("```python\nprint(1)\n```\nrepeat 3 times")
    for _ in range(3):
        turn = chat_turn(chat, tools)
        assert turn.tool_call is not None and "print(1)" in turn.tool_call.arguments
        chat = [*chat, {"role": "assistant", "content": None}, {"role": "tool", "content": "1"}]
    assert chat_turn(chat, tools).text.startswith("The result is: 1")


def test_several_fences_are_called_one_a_turn_in_order_then_the_last_result_quoted() -> None:
    tools = [{"type": "function", "function": {"name": n}} for n in ("a.one", "b.two")]
    first = {"name": "a.one", "arguments": {"x": 1}}
    second = {"name": "b.two", "arguments": {"y": 2}}
    chat = _user(f"```tool\n{json.dumps(first)}\n```\nthen\n```tool\n{json.dumps(second)}\n```")
    made = []
    for output in ("one done", "two done"):
        turn = chat_turn(chat, tools)
        assert turn.tool_call is not None
        made.append((turn.tool_call.name, json.loads(turn.tool_call.arguments)))
        chat = [*chat, {"role": "assistant", "content": None}, {"role": "tool", "content": output}]
    assert made == [("a.one", {"x": 1}), ("b.two", {"y": 2})]
    assert chat_turn(chat, tools).text.startswith("The result is: two done")
