"""The agent programming model: agents are layers you call (Lagent's PyTorch analogy).

agent = Agent(OpenAIChat(base_url=..., model=...), system_prompt="Answer in one word.")
reply = agent(AgentMessage(sender="user", content="hi"), session_id=7)
"""

from taskyard.agentkit.agents.agent import Agent, AsyncAgent
from taskyard.agentkit.agents.base import AgentInput, BaseAgent
from taskyard.agentkit.agents.build import build_agent, default_llm
from taskyard.agentkit.agents.containers import AgentDict, AgentList, AsyncSequential, Sequential
from taskyard.agentkit.agents.errors import (
    AgentError,
    EmptyReplyError,
    NotSynchronousError,
    UnknownSessionWarning,
)
from taskyard.agentkit.agents.node import AgentNode, StateKeys
from taskyard.agentkit.agents.params import LLMParams
from taskyard.agentkit.agents.registry import AGENTS, AgentFactory
from taskyard.agentkit.agents.streaming import AsyncStreamingAgent, StreamingAgent
from taskyard.agentkit.agents.tool_agent import (
    AsyncToolAgent,
    ToolAgent,
    ToolExecutor,
    TurnLimitError,
)
from taskyard.agentkit.agents.values import SessionValues

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
