"""DefaultAggregator: Lagent's roles and merging, system prompt forms, parser instruction."""

from __future__ import annotations

import pytest

from taskyard.agentkit.aggregators import DefaultAggregator
from taskyard.agentkit.parsers.base import OutputParser
from taskyard.agentkit.schema import ActionReturn, AgentMessage


class InstructedParser(OutputParser):
    def parse_response(self, response: object) -> None:
        return None

    def format_instruction(self) -> str:
        return "Answer in JSON."


def msg(sender: str, content: object) -> AgentMessage:
    return AgentMessage(sender=sender, content=content)  # type: ignore[arg-type]


def test_roles_system_first_and_consecutive_users_merged() -> None:
    history = [msg("user", "hi"), msg("critic", "be brief"), msg("bot", "hello"), msg("user", "x")]
    chat = DefaultAggregator().aggregate(history, "bot", system_prompt="Be nice.")
    assert chat == [
        {"role": "system", "content": "Be nice."},
        {"role": "user", "content": "hi\nbe brief"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "x"},
    ]


def test_consecutive_assistant_turns_are_not_merged() -> None:
    chat = DefaultAggregator().aggregate([msg("bot", "a"), msg("bot", "b")], "bot")
    assert [m["content"] for m in chat] == ["a", "b"]


def test_parser_instruction_joins_the_system_prompt_or_stands_alone() -> None:
    parser = InstructedParser()
    with_prompt = DefaultAggregator().aggregate([], "bot", parser, "Be nice.")
    assert with_prompt == [{"role": "system", "content": "Be nice.\n\nAnswer in JSON."}]
    alone = DefaultAggregator().aggregate([msg("user", "q")], "bot", parser)
    assert alone[0] == {"role": "system", "content": "Answer in JSON."}


def test_system_prompt_as_message_list_is_copied_not_mutated() -> None:
    prompt = [{"role": "system", "content": "S"}, {"role": "user", "content": "example"}]
    chat = DefaultAggregator().aggregate([msg("user", "real")], "bot", system_prompt=prompt)
    assert chat[1] == {"role": "user", "content": "example\nreal"}
    assert prompt[1]["content"] == "example"


def test_bad_system_prompt_entry_raises() -> None:
    with pytest.raises(TypeError, match="'role' and 'content'"):
        DefaultAggregator().aggregate([], "bot", system_prompt=[{"text": "no role"}])


def test_non_text_content_is_rendered_as_text() -> None:
    result = ActionReturn(result=[{"type": "text", "content": "42"}])
    failed = ActionReturn(errmsg="boom")
    history = [msg("user", {"k": 1}), msg("tool", result), msg("tool", failed)]
    chat = DefaultAggregator().aggregate(history, "bot")
    assert chat == [{"role": "user", "content": '{"k": 1}\n42\nboom'}]


class _CountingRenders(DefaultAggregator):
    def __init__(self) -> None:
        self.rendered_now: list[AgentMessage] = []

    def rendered(self, message: AgentMessage, name: str) -> list[dict]:
        self.rendered_now.append(message)
        return super().rendered(message, name)


def test_a_growing_history_is_aggregated_from_where_it_was_left() -> None:
    history = [msg("user", "a"), msg("bot", "b"), msg("user", "c")]
    aggregator = _CountingRenders()
    aggregator.aggregate(history, "bot", system_prompt="S")
    history += [msg("user", "d"), msg("bot", "e")]
    aggregator.rendered_now.clear()
    chat = aggregator.aggregate(history, "bot", system_prompt="S")
    assert aggregator.rendered_now == history[3:]  # only the new messages
    assert chat == DefaultAggregator().aggregate(history, "bot", system_prompt="S")
    assert chat[-2] == {"role": "user", "content": "c\nd"}  # merged across the two calls
    other = [history[0], msg("bot", "x")]  # same first message, another history
    assert DefaultAggregator().aggregate(other, "bot") == aggregator.aggregate(other, "bot")
