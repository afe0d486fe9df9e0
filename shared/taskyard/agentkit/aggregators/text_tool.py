"""The aggregator for models without native tool calling: tool results rendered as text."""

from __future__ import annotations

from taskyard.agentkit.aggregators.default import ChatMessage, DefaultAggregator, content_text
from taskyard.agentkit.parsers.tool import is_parse_error
from taskyard.agentkit.schema import ActionReturn, AgentMessage

__all__ = ["TextToolAggregator"]


class TextToolAggregator(DefaultAggregator):
    """The model's own turns stay its raw text (the call is written in the parser's protocol);
    a tool result (content an `ActionReturn`) becomes a `role` message from `template`.

    A turn whose call could not be parsed (PARSING_ERROR) is left out, as Lagent does, so the
    model is not shown its broken call again; the error result that follows it still is.
    With the default role ``user``, several results of one turn merge into one user message.
    """

    def __init__(self, role: str = "user", template: str = "Result of {name}:\n{result}") -> None:
        self.role = role
        self.template = template

    def render(self, message: AgentMessage, name: str) -> list[ChatMessage]:
        if message.sender == name and is_parse_error(message.formatted):
            return []
        if message.sender != name and isinstance(message.content, ActionReturn):
            text = self.template.format(name=message.sender, result=content_text(message.content))
            return [{"role": self.role, "content": text}]
        return super().render(message, name)
