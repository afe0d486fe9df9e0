"""Output parsers: what the model wrote, turned into the agent message's `formatted` part."""

from taskyard.agentkit.parsers.base import OutputParser, ToolStatusCode, response_text
from taskyard.agentkit.parsers.json_parser import JSONParser, ParseFailure
from taskyard.agentkit.parsers.native import NativeToolCallParser, decode_arguments
from taskyard.agentkit.parsers.tool import (
    InterpreterParser,
    MixedToolParser,
    PluginParser,
    PythonFenceParser,
    ToolParse,
    ToolParser,
    is_parse_error,
    json_object,
)

__all__ = [
    "InterpreterParser",
    "JSONParser",
    "MixedToolParser",
    "NativeToolCallParser",
    "OutputParser",
    "ParseFailure",
    "PluginParser",
    "PythonFenceParser",
    "ToolParse",
    "ToolParser",
    "ToolStatusCode",
    "decode_arguments",
    "is_parse_error",
    "json_object",
    "response_text",
]
