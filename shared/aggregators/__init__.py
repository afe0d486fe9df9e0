"""Aggregators: a session's memory turned into OpenAI chat messages for the model."""

from shared.aggregators.default import ChatMessage, DefaultAggregator, SystemPrompt, content_text
from shared.aggregators.few_shot import FewShotAggregator
from shared.aggregators.internlm_tool import InternLMToolAggregator
from shared.aggregators.native_tool import NativeToolAggregator
from shared.aggregators.text_tool import TextToolAggregator

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
