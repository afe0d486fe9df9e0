from taskyard.agentkit.parsers import NativeToolCallParser, decode_arguments
from taskyard.agentkit.schema import LLMResponse, ToolCall


def test_plain_text_parses_to_none() -> None:
    parser = NativeToolCallParser()
    assert parser.parse_response("just an answer") is None
    assert parser.parse_response(LLMResponse(text="just an answer")) is None


def test_tool_calls_become_tool_call_dicts_with_decoded_arguments() -> None:
    response = LLMResponse(
        text="let me compute",
        tool_calls=[
            ToolCall(id="c1", name="IPythonInterpreter", parameters={"command": "1+1"}),
            ToolCall(id="c2", name="WebBrowser.search", parameters='{"query": "redis"}'),
        ],
    )
    formatted = NativeToolCallParser().parse_response(response)
    assert formatted == {
        "tool_calls": [
            {"id": "c1", "name": "IPythonInterpreter", "parameters": {"command": "1+1"}},
            {"id": "c2", "name": "WebBrowser.search", "parameters": {"query": "redis"}},
        ]
    }
    assert [ToolCall.model_validate(c).id for c in formatted["tool_calls"]] == ["c1", "c2"]


def test_malformed_arguments_are_kept_raw_and_reported() -> None:
    response = LLMResponse(
        tool_calls=[
            ToolCall(id="ok", name="FinishAction", parameters='{"response": "4"}'),
            ToolCall(id="bad", name="IPythonInterpreter", parameters='{"command": "1+'),
        ]
    )
    formatted = NativeToolCallParser().parse_response(response)
    bad = formatted["tool_calls"][1]
    assert bad == {"id": "bad", "name": "IPythonInterpreter", "parameters": '{"command": "1+'}
    assert len(formatted["errors"]) == 1
    assert "bad (IPythonInterpreter)" in formatted["errors"][0]
    assert "not valid JSON" in formatted["errors"][0]


def test_arguments_must_be_an_object() -> None:
    assert decode_arguments("[1, 2]")[1] == "arguments must be a JSON object, got '[1, 2]'"
    assert decode_arguments("") == ({}, None)
    assert decode_arguments('{"a": 1}') == ({"a": 1}, None)


def test_native_calls_need_no_instruction() -> None:
    assert NativeToolCallParser().format_instruction() is None
