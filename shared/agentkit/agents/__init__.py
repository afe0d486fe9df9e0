"""The agent programming model: agents are layers you call (Lagent's PyTorch analogy).

agent = Agent(OpenAIChat(base_url=..., model=...), system_prompt="Answer in one word.")
reply = agent(AgentMessage(sender="user", content="hi"), session_id=7)
"""

from shared.agentkit.agents.agent import Agent, AsyncAgent
from shared.agentkit.agents.base import AgentInput, BaseAgent
from shared.agentkit.agents.build import build_agent, default_llm
from shared.agentkit.agents.containers import AgentDict, AgentList, AsyncSequential, Sequential
from shared.agentkit.agents.errors import (
    AgentError,
    EmptyReplyError,
    NotSynchronousError,
    UnknownSessionWarning,
)
from shared.agentkit.agents.node import AgentNode, StateKeys
from shared.agentkit.agents.params import LLMParams
from shared.agentkit.agents.registry import AGENTS, AgentFactory
from shared.agentkit.agents.streaming import AsyncStreamingAgent, StreamingAgent
from shared.agentkit.agents.tool_agent import (
    AsyncToolAgent,
    ToolAgent,
    ToolExecutor,
    TurnLimitError,
)
from shared.agentkit.agents.values import SessionValues

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
