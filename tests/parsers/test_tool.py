import pytest

from taskyard.agentkit.parsers import (
    InterpreterParser,
    MixedToolParser,
    PluginParser,
    PythonFenceParser,
    ToolParser,
    ToolStatusCode,
)
from taskyard.agentkit.schema import LLMResponse

PLUGIN_CALL = (
    "I should search.<|action_start|><|plugin|>\n"
    '{"name": "WebBrowser.search", "parameters": {"query": "celery"}}<|action_end|>\n'
)


def test_plain_answer_is_no_tool() -> None:
    parsed = PluginParser().parse_response("The answer is 4.")
    assert parsed["status"] == ToolStatusCode.NO_TOOL
    assert parsed["thought"] == "The answer is 4."
    assert parsed["action"] is None and parsed["tool_type"] is None


def test_plugin_call_is_validated_json() -> None:
    parsed = PluginParser().parse_response(PLUGIN_CALL)
    assert parsed["status"] == ToolStatusCode.VALID_TOOL
    assert parsed["tool_type"] == "plugin"
    assert parsed["thought"] == "I should search."
    assert parsed["action"] == {"name": "WebBrowser.search", "parameters": {"query": "celery"}}
    assert parsed["error"] is None


def test_broken_plugin_json_is_a_parse_error_with_the_raw_call() -> None:
    text = '<|action_start|><|plugin|>\n{"name": "x", <|action_end|>\n'
    parsed = PluginParser().parse_response(LLMResponse(text=text))
    assert parsed["status"] == ToolStatusCode.PARSING_ERROR
    assert parsed["action"] == '{"name": "x", '
    assert parsed["error"].startswith("could not read the plugin call")


def test_plugin_json_that_is_not_an_object_is_a_parse_error() -> None:
    parsed = PluginParser().parse_response("<|action_start|><|plugin|>\n[1]<|action_end|>\n")
    assert parsed["status"] == ToolStatusCode.PARSING_ERROR
    assert "expected a JSON object" in parsed["error"]


def test_interpreter_code_is_the_action_and_a_missing_end_is_tolerated() -> None:
    parsed = InterpreterParser().parse_response(
        "Compute it.<|action_start|><|interpreter|>\nprint(6 * 7)"
    )
    assert parsed["status"] == ToolStatusCode.VALID_TOOL
    assert parsed["tool_type"] == "interpreter"
    assert parsed["action"] == "print(6 * 7)"


def test_python_fence() -> None:
    parsed = PythonFenceParser().parse_response("Let me run:\n```python\nx = 1\nx\n```\nDone")
    assert parsed["action"] == "x = 1\nx\n"
    assert parsed["thought"] == "Let me run:\n"


def test_format_response_round_trips() -> None:
    parser = PluginParser()
    assert parser.format_response(parser.parse_response(PLUGIN_CALL)) == (
        "I should search.<|action_start|><|plugin|>\n"
        '{"name": "WebBrowser.search", "parameters": {"query": "celery"}}<|action_end|>\n'
    )
    assert parser.format_response(parser.parse_response("no call")) == "no call"


def test_template_fills_markers_and_rejects_unknown_fields() -> None:
    parser = ToolParser("x", begin="<x>", end="</x>", template="Call tools as {begin}...{end}")
    assert parser.format_instruction() == "Call tools as <x>...</x>"
    assert ToolParser("x", begin="<x>", end="</x>").format_instruction() is None
    with pytest.raises(ValueError, match="tools"):
        ToolParser("x", begin="<x>", end="</x>", template="{tools}")


def test_mixed_parser_picks_the_protocol_used() -> None:
    mixed = MixedToolParser(
        [InterpreterParser(template="code: {begin}"), PluginParser(template="json: {begin}")],
        template="Tools:",
    )
    assert mixed.parse_response(PLUGIN_CALL)["tool_type"] == "plugin"
    code = "<|action_start|><|interpreter|>\n1+1<|action_end|>\n"
    assert mixed.parse_response(code)["tool_type"] == "interpreter"
    assert mixed.parse_response("hi")["status"] == ToolStatusCode.NO_TOOL
    assert mixed.format_instruction() == (
        "Tools:\n\ncode: <|action_start|><|interpreter|>\n\n\njson: <|action_start|><|plugin|>\n"
    )
    assert mixed.format_response(mixed.parse_response(code)) == code
