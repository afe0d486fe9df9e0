"""Containers: `Sequential` pipes a message through agents; `AgentList` and `AgentDict` hold
agents so their memories join the parent's `state_dict` (keys ``"0.memory"``, ``"name.memory"``).

As in Lagent, ``Sequential(a, b)(message, exit_at=i)`` stops after the agent at step `i`
(counting from 0), going round the agents again past the last one: ``exit_at=0`` runs `a` only,
``exit_at=3`` runs a, b, a, b. Every other keyword of the call goes to each agent it runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, MutableMapping, MutableSequence
from itertools import cycle, islice
from typing import Any, cast, overload

from taskyard.agentkit.agents.agent import Agent, AsyncAgent
from taskyard.agentkit.agents.base import BaseAgent
from taskyard.agentkit.agents.drive import resolve, run_sync
from taskyard.agentkit.agents.node import AgentNode
from taskyard.agentkit.agents.params import Keywords, common_keywords
from taskyard.agentkit.memory import SessionId
from taskyard.agentkit.schema import AgentMessage

__all__ = ["AgentDict", "AgentList", "AsyncSequential", "Sequential"]


class _Chain(BaseAgent):
    """The pipeline, once: each agent's reply is the next agent's input."""

    _accepts: tuple[type[BaseAgent], ...] = (Agent, AsyncAgent)

    def __init__(self, *agents: BaseAgent, name: str | None = None, **kwargs: Any) -> None:
        if not agents:
            raise ValueError(f"{type(self).__name__} needs at least one agent")
        super().__init__(name=name, **kwargs)
        for index, agent in enumerate(agents):
            if not isinstance(agent, self._accepts):
                kinds = " or ".join(k.__name__ for k in self._accepts)
                raise TypeError(f"{type(self).__name__} takes {kinds}, not {agent!r}")
            setattr(self, str(index), agent)

    def __len__(self) -> int:
        return len(dict(self.named_children()))

    def __getitem__(self, index: int) -> BaseAgent:
        return self._chained()[index]

    def call_keywords(self) -> Keywords:
        """`exit_at`, and the keywords every agent in the chain accepts (they get them all)."""
        passed_on = common_keywords(agent.call_keywords() for agent in self._chained())
        return None if passed_on is None else passed_on | {"exit_at"}

    def _chained(self) -> list[Agent | AsyncAgent]:
        # The constructor registered agents of `_accepts` only.
        return [cast("Agent | AsyncAgent", agent) for _, agent in self.named_children()]

    async def _chain(
        self,
        messages: tuple[AgentMessage, ...],
        session_id: SessionId,
        exit_at: int | None,
        kwargs: dict[str, Any],
    ) -> AgentMessage:
        agents = self._chained()
        steps = len(agents) if exit_at is None else _checked_exit_at(exit_at) + 1
        reply: AgentMessage | None = None
        for agent in islice(cycle(agents), steps):
            reply = await resolve(agent(*messages, session_id=session_id, **kwargs))
            messages = (reply,)
        assert reply is not None  # the constructor refuses an empty chain
        return reply


def _checked_exit_at(exit_at: Any) -> int:
    if isinstance(exit_at, bool) or not isinstance(exit_at, int):
        raise TypeError(f"exit_at is the index of the last step (an int), not {exit_at!r}")
    if exit_at < 0:
        raise ValueError(f"exit_at counts steps from 0, so it cannot be {exit_at}")
    return exit_at


class Sequential(_Chain, Agent):
    """Sync agents in a row: ``Sequential(writer, critic)(message, session_id=1)``."""

    _accepts = (Agent,)

    def forward(
        self,
        *messages: AgentMessage,
        session_id: SessionId = 0,
        exit_at: int | None = None,
        **kwargs: Any,
    ) -> AgentMessage:
        return run_sync(self._chain(messages, session_id, exit_at, kwargs), self._owner())


class AsyncSequential(_Chain, AsyncAgent):
    """Async (or sync) agents in a row: ``await AsyncSequential(a, b)(message)``."""

    async def forward(
        self,
        *messages: AgentMessage,
        session_id: SessionId = 0,
        exit_at: int | None = None,
        **kwargs: Any,
    ) -> AgentMessage:
        return await self._chain(messages, session_id, exit_at, kwargs)


def _checked(agent: Any) -> AgentNode:
    if not isinstance(agent, AgentNode):
        raise TypeError(f"agent containers hold agents, not {type(agent).__name__}")
    return agent


class AgentList(AgentNode, MutableSequence[AgentNode]):
    """A list of agents; sub-agent names are their positions."""

    def __init__(self, agents: Iterable[AgentNode] = ()) -> None:
        self._items: list[AgentNode] = [_checked(a) for a in agents]

    def named_children(self) -> Iterator[tuple[str, AgentNode]]:
        return ((str(i), agent) for i, agent in enumerate(self._items))

    @overload
    def __getitem__(self, index: int) -> AgentNode: ...
    @overload
    def __getitem__(self, index: slice) -> list[AgentNode]: ...
    def __getitem__(self, index: int | slice) -> AgentNode | list[AgentNode]:
        return self._items[index]

    def __setitem__(self, index: Any, agent: Any) -> None:
        if isinstance(index, slice):
            self._items[index] = [_checked(a) for a in agent]
        else:
            self._items[index] = _checked(agent)

    def __delitem__(self, index: int | slice) -> None:
        del self._items[index]

    def __len__(self) -> int:
        return len(self._items)

    def insert(self, index: int, agent: AgentNode) -> None:
        self._items.insert(index, _checked(agent))


class AgentDict(AgentNode, MutableMapping[str, AgentNode]):
    """A mapping of names to agents; names are strings without dots (they make the keys)."""

    def __init__(self, agents: Mapping[str, AgentNode] | None = None) -> None:
        self._items: dict[str, AgentNode] = {}
        self.update(agents or {})

    def named_children(self) -> Iterator[tuple[str, AgentNode]]:
        return iter(list(self._items.items()))

    def __getitem__(self, name: str) -> AgentNode:
        return self._items[name]

    def __setitem__(self, name: str, agent: AgentNode) -> None:
        if not isinstance(name, str) or "." in name or not name:
            raise KeyError(f"agent names are non-empty strings without '.', not {name!r}")
        self._items[name] = _checked(agent)

    def __delitem__(self, name: str) -> None:
        del self._items[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)
