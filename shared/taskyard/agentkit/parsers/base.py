"""What every output parser offers: `parse_response` for a model turn, `format_instruction` for
the prompt that teaches the model the format."""

from __future__ import annotations

from abc import ABC, abstractmethod
from enum import IntEnum
from typing import Any

from taskyard.agentkit.schema import LLMResponse

__all__ = ["OutputParser", "ToolStatusCode", "response_text"]


class ToolStatusCode(IntEnum):
    """What a text-protocol parser found in a model turn; values match Lagent's."""

    NO_TOOL = 0
    VALID_TOOL = 1
    PARSING_ERROR = -1


class OutputParser(ABC):
    """Turns a model turn into the `formatted` part of the agent's message.

    The raw text stays in the message's `content`; what `parse_response` returns goes into
    `formatted`. A parser never raises on what a model wrote: a malformed turn becomes a parse
    error the model can read and correct.
    """

    @abstractmethod
    def parse_response(self, response: str | LLMResponse) -> Any:
        """Extract the structure of one model turn."""

    def format_instruction(self) -> str | None:
        """The prompt text that explains the format to the model; None when it needs none."""
        return None


def response_text(response: str | LLMResponse) -> str:
    """The text of a model turn, whether a client gave a string or an `LLMResponse`."""
    return response if isinstance(response, str) else response.text
