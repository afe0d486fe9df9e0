"""One agent call for one step. Interim body until shared.agents lands (issue 3)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from openai import AsyncOpenAI

from shared.schema import ActionReturn, AgentMessage, ToolCall
from shared.settings import Settings
from shared.spec import AgentSpec

__all__ = ["run_agent_step"]

_IPYTHON_TOOL = {
    "type": "function",
    "function": {
        "name": "IPythonInterpreter",
        "description": "Run Python code in a stateful interpreter; returns output and result.",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string", "description": "Python source"}},
            "required": ["command"],
        },
    },
}


async def run_agent_step(
    spec: AgentSpec,
    history: list[AgentMessage],
    inputs: list[AgentMessage],
    *,
    session_id: str,
    task_id: str,
    settings: Settings,
    on_token: Callable[[str], Awaitable[None]] | None = None,
) -> AgentMessage:
    """Run the agent once on the session's history plus this step's inputs."""
    client = AsyncOpenAI(base_url=settings.llm_base_url, api_key=settings.llm_api_key)
    headers = {"X-Session-ID": session_id, "X-Task-ID": task_id}
    tools = [_IPYTHON_TOOL] if "IPythonInterpreter" in spec.tools else None
    reply = await client.chat.completions.create(
        model=spec.model or settings.default_model,
        messages=_to_chat(spec, [*history, *inputs]),
        tools=tools,
        extra_headers=headers,
    )
    choice = reply.choices[0].message
    calls = [
        ToolCall(id=c.id, name=c.function.name, parameters=json.loads(c.function.arguments))
        for c in choice.tool_calls or []
    ]
    formatted = {"tool_calls": [c.model_dump() for c in calls]} if calls else None
    return AgentMessage(sender=spec.name, content=choice.content or "", formatted=formatted)


def _to_chat(spec: AgentSpec, messages: list[AgentMessage]) -> list[dict]:
    chat: list[dict] = (
        [{"role": "system", "content": spec.system_prompt}] if spec.system_prompt else []
    )
    for m in messages:
        if m.sender == spec.name:
            entry: dict = {"role": "assistant", "content": m.content or ""}
            calls = (m.formatted or {}).get("tool_calls") if isinstance(m.formatted, dict) else None
            if calls:
                entry["tool_calls"] = [
                    {
                        "id": c["id"],
                        "type": "function",
                        "function": {"name": c["name"], "arguments": json.dumps(c["parameters"])},
                    }
                    for c in calls
                ]
            chat.append(entry)
        elif isinstance(m.content, ActionReturn):
            text = m.content.format_result() or m.content.errmsg or ""
            chat.append(
                {"role": "tool", "tool_call_id": m.extra_info["tool_call_id"], "content": text}
            )
        else:
            chat.append({"role": "user", "content": str(m.content)})
    return chat
