"""Text-protocol tool calls: the model writes a call between a begin and an end marker.

``ToolParser`` handles one protocol (a code fence, InternLM's ``<|action_start|><|plugin|>``
markers, ...); ``MixedToolParser`` tries several. Each parses a turn into a `ToolParse` dict,
the shape Lagent's parsers give, plus the reason when the call could not be read.
"""

from __future__ import annotations

import json
import string
from collections.abc import Callable
from typing import Any, TypedDict

from taskyard.agentkit.parsers.base import OutputParser, ToolStatusCode, response_text
from taskyard.agentkit.schema import LLMResponse

__all__ = [
    "InterpreterParser",
    "MixedToolParser",
    "PluginParser",
    "PythonFenceParser",
    "ToolParse",
    "ToolParser",
    "is_parse_error",
    "json_object",
]


class ToolParse(TypedDict):
    """One parsed turn. `action` is the call (code text, or a validated dict); None without one."""

    tool_type: str | None
    thought: str
    action: Any
    status: ToolStatusCode
    error: str | None


def is_parse_error(formatted: Any) -> bool:
    """Whether `formatted` is a `ToolParse` whose call could not be read (PARSING_ERROR)."""
    return isinstance(formatted, dict) and formatted.get("status") == ToolStatusCode.PARSING_ERROR


def json_object(text: str) -> dict[str, Any]:
    """Validator for JSON calls such as ``{"name": ..., "parameters": {...}}``."""
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {type(value).__name__}")
    return value


class ToolParser(OutputParser):
    """Finds a call of one `tool_type` between `begin` and `end` in the model's text.

    Text before `begin` is the thought. A missing `end` is tolerated (a stop word often cuts
    it off). `validate` turns the raw call text into the action; when it raises, the status is
    PARSING_ERROR, the raw text stays in `action` and `error` says why.
    `template` is the instruction for the prompt; ``{begin}`` and ``{end}`` are filled in.
    """

    def __init__(
        self,
        tool_type: str,
        *,
        begin: str,
        end: str,
        template: str = "",
        validate: Callable[[str], Any] | None = None,
    ) -> None:
        self.tool_type = tool_type
        self.begin = begin
        self.end = end
        self.template = template
        self.validate = validate
        _check_template(template, {"begin", "end"})

    def format_instruction(self) -> str | None:
        return self.template.format(begin=self.begin, end=self.end) if self.template else None

    def parse_response(self, response: str | LLMResponse) -> ToolParse:
        text = response_text(response)
        thought, found, rest = text.partition(self.begin)
        if not found:
            return _parse(None, text, None, ToolStatusCode.NO_TOOL)
        raw = rest.split(self.end, 1)[0] if self.end else rest
        if self.validate is None:
            return _parse(self.tool_type, thought, raw, ToolStatusCode.VALID_TOOL)
        try:
            action = self.validate(raw)
        except Exception as exc:  # any validator failure is the model's to fix, not ours
            error = f"could not read the {self.tool_type} call: {exc}"
            return _parse(self.tool_type, thought, raw, ToolStatusCode.PARSING_ERROR, error)
        return _parse(self.tool_type, thought, action, ToolStatusCode.VALID_TOOL)

    def format_response(self, parsed: ToolParse) -> str:
        """The text the model would have written for `parsed` (for few-shot examples)."""
        if parsed["action"] is None:
            return parsed["thought"]
        action = parsed["action"]
        body = action if isinstance(action, str) else json.dumps(action, ensure_ascii=False)
        return f"{parsed['thought']}{self.begin}{body}{self.end}"


class InterpreterParser(ToolParser):
    """InternLM's code-interpreter protocol: code between the interpreter markers."""

    def __init__(self, template: str = "") -> None:
        super().__init__(
            "interpreter",
            begin="<|action_start|><|interpreter|>\n",
            end="<|action_end|>\n",
            template=template,
        )


class PluginParser(ToolParser):
    """InternLM's plugin protocol: a JSON ``{"name", "parameters"}`` object between markers."""

    def __init__(self, template: str = "") -> None:
        super().__init__(
            "plugin",
            begin="<|action_start|><|plugin|>\n",
            end="<|action_end|>\n",
            template=template,
            validate=json_object,
        )


class PythonFenceParser(ToolParser):
    """Code in a Markdown ```python fence is a call to the interpreter."""

    def __init__(self, template: str = "") -> None:
        super().__init__("interpreter", begin="```python\n", end="```", template=template)


class MixedToolParser(OutputParser):
    """Several protocols at once: the first parser whose `begin` occurs in the text wins."""

    def __init__(self, parsers: list[ToolParser], template: str = "") -> None:
        self.parsers = {parser.tool_type: parser for parser in parsers}
        self.template = template

    def format_instruction(self) -> str | None:
        parts = [self.template, *(p.format_instruction() or "" for p in self.parsers.values())]
        return "\n\n".join(part for part in parts if part.strip()) or None

    def parse_response(self, response: str | LLMResponse) -> ToolParse:
        text = response_text(response)
        for parser in self.parsers.values():
            parsed = parser.parse_response(text)
            if parsed["status"] != ToolStatusCode.NO_TOOL:
                return parsed
        return _parse(None, text, None, ToolStatusCode.NO_TOOL)

    def format_response(self, parsed: ToolParse) -> str:
        """The text the model would have written for `parsed`."""
        if parsed["action"] is None:
            return parsed["thought"]
        return self.parsers[parsed["tool_type"] or ""].format_response(parsed)


def _parse(
    tool_type: str | None,
    thought: str,
    action: Any,
    status: ToolStatusCode,
    error: str | None = None,
) -> ToolParse:
    return ToolParse(
        tool_type=tool_type, thought=thought, action=action, status=status, error=error
    )


def _check_template(template: str, known: set[str]) -> None:
    fields = {name for _, name, _, _ in string.Formatter().parse(template) if name}
    if unknown := fields - known:
        raise ValueError(f"template fields {sorted(unknown)} are not among {sorted(known)}")
