"""LLM clients: OpenAI-compatible, sync and async, stream and not, with session affinity."""

from taskyard.agentkit.llms.base import (
    AsyncChatModel,
    ChatMessages,
    ChatModel,
    ChatResult,
    UsageSink,
)
from taskyard.agentkit.llms.errors import LLMError
from taskyard.agentkit.llms.openai_chat import AsyncOpenAIChat, OpenAIChat

__all__ = [
    "AsyncChatModel",
    "AsyncOpenAIChat",
    "ChatMessages",
    "ChatModel",
    "ChatResult",
    "LLMError",
    "OpenAIChat",
    "UsageSink",
]
