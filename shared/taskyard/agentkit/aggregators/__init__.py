"""Aggregators: a session's memory turned into OpenAI chat messages for the model."""

from taskyard.agentkit.aggregators.default import (
    ChatMessage,
    DefaultAggregator,
    SystemPrompt,
    content_text,
)
from taskyard.agentkit.aggregators.few_shot import FewShotAggregator
from taskyard.agentkit.aggregators.internlm_tool import InternLMToolAggregator
from taskyard.agentkit.aggregators.native_tool import NativeToolAggregator
from taskyard.agentkit.aggregators.text_tool import TextToolAggregator

__all__ = [
    "ChatMessage",
    "DefaultAggregator",
    "FewShotAggregator",
    "InternLMToolAggregator",
    "NativeToolAggregator",
    "SystemPrompt",
    "TextToolAggregator",
    "content_text",
]
