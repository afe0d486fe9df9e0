"""The agent tree: sub-agents register like PyTorch submodules, and per-session state
(`state_dict`, `load_state_dict`, `reset`) covers the whole tree with dotted keys."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from shared.memory import SessionId, SessionMemory

__all__ = ["AgentNode"]


class AgentNode:
    """Anything that holds sub-agents and, optionally, a memory.

    Assigning an agent to an attribute registers it under the attribute's name, so
    ``self.planner = Agent(...)`` puts ``planner.memory`` into `state_dict`.
    """

    memory: SessionMemory | None = None

    def __setattr__(self, name: str, value: Any) -> None:
        children = self.__dict__.setdefault("_agents", {})
        if isinstance(value, AgentNode):
            children[name] = value
        else:
            children.pop(name, None)
        super().__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        self.__dict__.get("_agents", {}).pop(name, None)
        super().__delattr__(name)

    def named_children(self) -> Iterator[tuple[str, AgentNode]]:
        """Direct sub-agents with their names, in registration order."""
        return iter(dict(self.__dict__.get("_agents", {})).items())

    def named_agents(self, prefix: str = "") -> Iterator[tuple[str, AgentNode]]:
        """This agent and every sub-agent below it, with dotted names ("" for this one)."""
        yield prefix, self
        for name, child in self.named_children():
            yield from child.named_agents(f"{prefix}.{name}" if prefix else name)

    def state_dict(self, session_id: SessionId = 0) -> dict[str, list[dict[str, Any]]]:
        """The session's memories as plain dicts: ``{"memory": [...], "sub.memory": [...]}``."""
        return {key: memory.save(session_id) for key, memory in self._memories().items()}

    def load_state_dict(
        self, state: dict[str, list[dict[str, Any]]], session_id: SessionId = 0
    ) -> None:
        """Restore the session from `state_dict` output; the keys must match exactly."""
        memories = self._memories()
        missing, unexpected = memories.keys() - state.keys(), state.keys() - memories.keys()
        if missing or unexpected:
            raise KeyError(
                f"state_dict keys do not match the agent tree: missing {sorted(missing)}, "
                f"unexpected {sorted(unexpected)}"
            )
        for key, memory in memories.items():
            memory.load(state[key], session_id)

    def reset(self, session_id: SessionId = 0) -> None:
        """Forget this session in this agent and every sub-agent; other sessions stay."""
        for memory in self._memories().values():
            memory.reset(session_id)

    def named_memories(self) -> dict[str, SessionMemory]:
        """Every memory of the tree by its `state_dict` key (``"memory"``, ``"writer.memory"``)."""
        return self._memories()

    def _memories(self) -> dict[str, SessionMemory]:
        return {
            f"{name}.memory" if name else "memory": node.memory
            for name, node in self.named_agents()
            if node.memory is not None
        }
