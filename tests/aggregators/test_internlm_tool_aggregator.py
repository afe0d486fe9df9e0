"""InternLMToolAggregator: InternLM's chat format for text-protocol tools, and (as Lagent's)
a turn whose call failed to parse is not shown back to the model."""

from __future__ import annotations

from taskyard.agentkit.aggregators import (
    FewShotAggregator,
    InternLMToolAggregator,
    TextToolAggregator,
)
from taskyard.agentkit.parsers import InterpreterParser, MixedToolParser, PluginParser
from taskyard.agentkit.schema import ActionReturn, AgentMessage

BEGIN, END = "<|action_start|><|plugin|>\n", "<|action_end|>\n"
CALL = '{"name": "Echo", "parameters": {"text": "hi"}}'
BROKEN = f'Let me try.{BEGIN}{{"name": "Echo", "parameters": {END}'


def turn(text: str, parser: PluginParser | MixedToolParser) -> AgentMessage:
    return AgentMessage(sender="bot", content=text, formatted=parser.parse_response(text))


def result(text: str, error: str | None = None) -> AgentMessage:
    content = ActionReturn(type="Echo", result=[{"type": "text", "content": text}], errmsg=error)
    return AgentMessage(sender="Echo", content=content)


def test_a_turn_whose_call_failed_to_parse_is_left_out_but_its_error_is_shown() -> None:
    parser = PluginParser()
    history = [
        AgentMessage(content="say hi"),
        turn(BROKEN, parser),
        result("", error="could not read the plugin call"),
        turn(f"Again.{BEGIN}{CALL}{END}", parser),
    ]
    chat = InternLMToolAggregator().aggregate(history, "bot", parser)
    assert chat == [
        {"role": "user", "content": "say hi"},
        {"role": "environment", "content": "could not read the plugin call"},
        {"role": "assistant", "content": f"Again.{BEGIN}{CALL}{END}"},
    ]


def test_calls_are_written_again_whole_and_results_are_named_wrapped_environment() -> None:
    parser = MixedToolParser([PluginParser(), InterpreterParser()])
    cut_off = "Run it.<|action_start|><|interpreter|>\nprint(1)"  # the stop word ate the end
    aggregator = InternLMToolAggregator(environment_begin="<out>", environment_end="</out>")
    chat = aggregator.aggregate([turn(cut_off, parser), result("1")], "bot", parser)
    assert chat == [
        {"role": "assistant", "content": f"{cut_off}<|action_end|>\n"},
        {"role": "environment", "name": "interpreter", "content": "<out>1</out>"},
    ]


def test_the_parser_instruction_is_its_own_system_message_named_after_the_tool_type() -> None:
    parser = PluginParser(template="Call tools between {begin} and {end}.")
    chat = InternLMToolAggregator().aggregate([], "bot", parser, system_prompt="Be brief.")
    assert chat == [
        {"role": "system", "content": "Be brief."},
        {"role": "system", "name": "plugin", "content": f"Call tools between {BEGIN} and {END}."},
    ]


def test_the_text_tool_aggregator_leaves_a_broken_call_out_too() -> None:
    parser = PluginParser()
    history = [AgentMessage(content="say hi"), turn(BROKEN, parser), result("", error="bad call")]
    chat = TextToolAggregator().aggregate(history, "bot", parser)
    assert chat == [{"role": "user", "content": "say hi\nResult of Echo:\nbad call"}]


class FewShotInternLM(FewShotAggregator, InternLMToolAggregator):
    """Lagent's `few_shot`, by composition."""


def test_few_shot_examples_compose_in_front_of_the_conversation() -> None:
    parser = PluginParser(template="Tools: {begin}")
    example = {"role": "user", "content": "example"}
    chat = FewShotInternLM([example]).aggregate([result("1")], "bot", parser, "Be brief.")
    assert [m["role"] for m in chat] == ["system", "system", "user", "environment"]
    assert chat[2] == example
