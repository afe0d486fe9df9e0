"""What a task asks for: the agent to run, inline or by registered name. Workers build the agent
from this; the gateway validates it at the door."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["AgentSpec"]


class AgentSpec(BaseModel):
    """An agent described inline (model, prompt, tools, limits) or by a registered name."""

    model_config = ConfigDict(extra="forbid")

    agent: str | None = Field(
        default=None, description="A registered agent's name; inline fields then only override."
    )
    name: str = Field(default="assistant", min_length=1, max_length=64)
    model: str | None = Field(default=None, description="Model name; default from settings.")
    system_prompt: str | None = Field(default=None, max_length=100_000)
    tools: list[str] = Field(default_factory=lambda: ["IPythonInterpreter"], max_length=32)
    max_steps: int | None = Field(default=None, ge=1, le=100)
    temperature: float | None = Field(default=None, ge=0, le=2)
