"""The agent tree: sub-agents register like PyTorch submodules, and per-session state
(`state_dict`, `load_state_dict`, `reset`) covers the whole tree with dotted keys: each
memory's messages (``"writer.memory"``) and each `SessionValues` attribute's values
(``"planner.notes"``), as PyTorch's covers parameters and buffers."""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

from taskyard.agentkit.agents.errors import UnknownSessionWarning
from taskyard.agentkit.agents.values import SessionValues
from taskyard.agentkit.memory import SessionId, SessionMemory

__all__ = ["AgentNode", "State", "StateKeys"]

# A memory's key holds its messages (a list of dicts), a `SessionValues` key its values (a dict).
State = dict[str, Any]


class StateKeys(NamedTuple):
    """What a non-strict `load_state_dict` left alone: tree keys the state lacked, and state
    keys the tree has no memory for."""

    missing: list[str]
    unexpected: list[str]


class AgentNode:
    """Anything that holds sub-agents and, optionally, a memory.

    Assigning an agent to an attribute registers it under the attribute's name, so
    ``self.planner = Agent(...)`` puts ``planner.memory`` into `state_dict`; assigning
    `SessionValues` registers them the same way (``self.notes = SessionValues()``: ``notes``).
    """

    memory: SessionMemory | None = None

    def __setattr__(self, name: str, value: Any) -> None:
        children = self.__dict__.setdefault("_agents", {})
        values = self.__dict__.setdefault("_values", {})
        children.pop(name, None)
        values.pop(name, None)
        if isinstance(value, AgentNode):
            children[name] = value
        elif isinstance(value, SessionValues):
            values[name] = value
        super().__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        self.__dict__.get("_agents", {}).pop(name, None)
        self.__dict__.get("_values", {}).pop(name, None)
        super().__delattr__(name)

    def named_children(self) -> Iterator[tuple[str, AgentNode]]:
        """Direct sub-agents with their names, in registration order."""
        return iter(dict(self.__dict__.get("_agents", {})).items())

    def named_agents(self, prefix: str = "") -> Iterator[tuple[str, AgentNode]]:
        """This agent and every sub-agent below it, with dotted names ("" for this one)."""
        yield prefix, self
        for name, child in self.named_children():
            yield from child.named_agents(f"{prefix}.{name}" if prefix else name)

    def state_dict(self, session_id: SessionId = 0) -> State:
        """The session's state as plain JSON: ``{"memory": [...], "sub.memory": [...],
        "sub.notes": {...}}``, memories first.

        A session that nothing of the tree holds gives empty lists (and defaults) and, as in
        Lagent, an `UnknownSessionWarning` (a mistyped session id would otherwise pass
        unnoticed)."""
        parts = self._parts()
        if parts and not any(session_id in part for part in parts.values()):
            warnings.warn(
                f"{self!r} has no session {session_id!r}: its state is empty",
                UnknownSessionWarning,
                stacklevel=2,
            )
        return {key: part.save(session_id) for key, part in parts.items()}

    def load_state_dict(
        self, state: Mapping[str, list[Any]], session_id: SessionId = 0, *, strict: bool = True
    ) -> StateKeys:
        """Restore the session from `state_dict` output.

        With `strict` (the default) the keys must match the tree exactly, else `KeyError`.
        Without it, as PyTorch's ``strict=False``, the keys the tree and `state` share are
        loaded, the others left alone and returned: ``load_state_dict({"memory": history},
        session_id, strict=False)`` sets just the top memory, on any agent.
        """
        parts = self._parts()
        missing = sorted(parts.keys() - state.keys())
        unexpected = sorted(state.keys() - parts.keys())
        if strict and (missing or unexpected):
            raise KeyError(
                f"state_dict keys do not match the agent tree: missing {missing}, "
                f"unexpected {unexpected}"
            )
        for key, part in parts.items():
            if key in state:
                part.load(state[key], session_id)
        return StateKeys(missing, unexpected)

    def reset(self, session_id: SessionId = 0) -> None:
        """Forget this session in this agent and every sub-agent; other sessions stay."""
        for part in self._parts().values():
            part.reset(session_id)

    def named_memories(self) -> dict[str, SessionMemory]:
        """Every memory of the tree by its `state_dict` key (``"memory"``, ``"writer.memory"``)."""
        return {
            f"{name}.memory" if name else "memory": node.memory
            for name, node in self.named_agents()
            if node.memory is not None
        }

    def named_values(self) -> dict[str, SessionValues]:
        """Every `SessionValues` of the tree by its `state_dict` key (``"planner.notes"``)."""
        return {
            f"{name}.{attr}" if name else attr: values
            for name, node in self.named_agents()
            for attr, values in node.__dict__.get("_values", {}).items()
        }

    def _parts(self) -> dict[str, SessionMemory | SessionValues]:
        return {**self.named_memories(), **self.named_values()}
