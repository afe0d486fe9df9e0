"""The agent programming model: agents are layers you call (Lagent's PyTorch analogy).

agent = Agent(OpenAIChat(base_url=..., model=...), system_prompt="Answer in one word.")
reply = agent(AgentMessage(sender="user", content="hi"), session_id=7)
"""

from shared.agents.agent import Agent, AsyncAgent
from shared.agents.base import AgentInput, BaseAgent
from shared.agents.build import build_agent, default_llm
from shared.agents.containers import AgentDict, AgentList, AsyncSequential, Sequential
from shared.agents.errors import (
    AgentError,
    EmptyReplyError,
    NotSynchronousError,
    UnknownSessionWarning,
)
from shared.agents.node import AgentNode, StateKeys
from shared.agents.params import LLMParams
from shared.agents.registry import AGENTS, AgentFactory
from shared.agents.streaming import AsyncStreamingAgent, StreamingAgent
from shared.agents.tool_agent import AsyncToolAgent, ToolAgent, ToolExecutor, TurnLimitError
from shared.agents.values import SessionValues

__all__ = [
    "AGENTS",
    "Agent",
    "AgentDict",
    "AgentError",
    "AgentFactory",
    "AgentInput",
    "AgentList",
    "AgentNode",
    "AsyncAgent",
    "AsyncSequential",
    "AsyncStreamingAgent",
    "AsyncToolAgent",
    "BaseAgent",
    "EmptyReplyError",
    "LLMParams",
    "NotSynchronousError",
    "Sequential",
    "SessionValues",
    "StateKeys",
    "StreamingAgent",
    "ToolAgent",
    "ToolExecutor",
    "TurnLimitError",
    "UnknownSessionWarning",
    "build_agent",
    "default_llm",
]
