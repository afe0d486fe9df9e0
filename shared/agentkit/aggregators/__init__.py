"""Aggregators: a session's memory turned into OpenAI chat messages for the model."""

from shared.agentkit.aggregators.default import (
    ChatMessage,
    DefaultAggregator,
    SystemPrompt,
    content_text,
)
from shared.agentkit.aggregators.few_shot import FewShotAggregator
from shared.agentkit.aggregators.internlm_tool import InternLMToolAggregator
from shared.agentkit.aggregators.native_tool import NativeToolAggregator
from shared.agentkit.aggregators.text_tool import TextToolAggregator

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
