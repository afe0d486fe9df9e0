"""The agents an agent worker process keeps warm, and what each session's state holds.

Building an agent (tool schemas, parser, client) and loading a session's whole history are
the expensive parts of a step, and both grow with the session. So a process keeps one agent
per (tenant, spec), and per session the messages it already loaded: the next step asks Redis
only for what came after (`StepStart.memories`), for every memory of the agent tree
(``memory``, ``writer.memory``, ``critics.0.memory``). The tree's `SessionValues` (its state
that is not messages) are small: each step reads them whole and writes those that changed.
So the agent's whole `state_dict` round-trips through Redis between steps. Redis stays the
truth: a stale, rewritten or evicted session is loaded whole again, and a step that fails or
is not committed drops its session here.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from services.agent_worker.memory_size import MemorySize
from taskyard.agentkit.agents import AsyncAgent
from taskyard.agentkit.memory import MemoryManager, SessionMemory
from taskyard.agentkit.memory.base import from_state
from taskyard.agentkit.schema import AgentMessage
from taskyard.agentkit.spec import AgentSpec
from taskyard.runtime.store import StepStart, TaskStore
from taskyard.runtime.task import TaskRecord

__all__ = ["LiveAgents", "LiveSession"]

BuildAgent = Callable[[AgentSpec], AsyncAgent]
ToolEntry = dict[str, Any]  # an OpenAI ``tools`` entry


@dataclass(slots=True)
class LiveSession:
    """A session's agent and, per memory path, how many of Redis's messages it holds."""

    tenant: str
    session_id: str
    spec_key: str
    agent: AsyncAgent
    offsets: dict[str, int]
    epoch: str
    shared: bool = True  # kept between steps (False: a one-off for a duplicate delivery)
    busy: bool = False
    # How many messages each memory held when the step's call began (compaction may have
    # replaced old ones by a summary, so this is not the Redis offset).
    before: dict[str, int] = field(default_factory=dict)
    # Each `SessionValues` as Redis holds it (JSON), and what this step's commit writes.
    values: dict[str, str] = field(default_factory=dict)
    staged: dict[str, str] = field(default_factory=dict)
    # The memory's size in tokens as of the last step (`Compactor`).
    memory_size: MemorySize = field(default_factory=MemorySize)

    def mark(self) -> None:
        """Note what the memories hold now: the step's call begins."""
        self.before = {
            path: len(held(memory, self.session_id))
            for path, memory in self.agent.named_memories().items()
        }

    def new_messages(self) -> dict[str, list[AgentMessage]]:
        """What each memory gained since `mark`: this step's messages."""
        return {
            path: held(memory, self.session_id)[self.before[path] :]
            for path, memory in self.agent.named_memories().items()
        }

    def new_values(self) -> dict[str, str]:
        """The session values this step changed, as JSON (staged for `LiveAgents.release`)."""
        now = {
            path: _json(values.save(self.session_id))
            for path, values in self.agent.named_values().items()
        }
        self.staged = {path: text for path, text in now.items() if self.values.get(path) != text}
        return self.staged

    def load_values(self, saved: Mapping[str, str]) -> None:
        """Take the session values Redis holds where they differ from what the agent holds."""
        for path, values in self.agent.named_values().items():
            text = saved.get(path)
            if text is not None and text != self.values.get(path):
                values.load(orjson.loads(text), self.session_id)
                self.values[path] = text


class LiveAgents:
    """Warm agents and sessions, least recently used first out."""

    def __init__(self, build: BuildAgent, max_sessions: int = 10_000, max_agents: int = 256):
        self.build = build
        self.max_sessions = max_sessions
        self.max_agents = max_agents
        self._agents: OrderedDict[tuple[str, str], AsyncAgent] = OrderedDict()
        self._sessions: OrderedDict[tuple[str, str], LiveSession] = OrderedDict()

    def offsets(self, tenant: str, session_id: str) -> tuple[dict[str, int], str]:
        """What to ask Redis for: per memory path, the messages held (and their epoch)."""
        live = self._sessions.get((tenant, session_id))
        if live is None or live.busy:
            return {"memory": 0}, "0"
        return dict(live.offsets), live.epoch

    async def acquire(
        self, start: StepStart, store: TaskStore, mcp_tools: Sequence[ToolEntry] = ()
    ) -> LiveSession:
        """The session's agent with its memory up to date for this step; `release` it after.
        `mcp_tools`: the task's MCP servers' tools, offered besides the spec's own (an agent
        is kept per spec and tools: a server's tools may change between listings)."""
        record = start.record
        key = (record.tenant, record.session_id)
        spec_key = record.spec.model_dump_json(exclude_unset=True)
        if mcp_tools:
            spec_key += "\n" + orjson.dumps(list(mcp_tools)).decode()
        live = self._sessions.get(key)
        if live is not None and not live.busy and _fits(live, start, spec_key):
            _apply_tails(live, start)
            self._sessions.move_to_end(key)
        else:
            duplicate = bool(live and live.busy)
            live = await self._load(start, store, spec_key, mcp_tools, duplicate)
        live.load_values(start.values)
        live.busy = True
        live.mark()
        return live

    def release(self, live: LiveSession, committed: Mapping[str, Sequence[object]] | None) -> None:
        """After the step: `committed` (what each memory gained, now in Redis too) moves the
        offsets on; None means the step did not land, so the session is dropped here."""
        live.busy = False
        if not live.shared:
            return
        if committed is None:
            self._drop((live.tenant, live.session_id))
            return
        for path, messages in committed.items():
            live.offsets[path] += len(messages)
        live.values.update(live.staged)

    async def _load(
        self,
        start: StepStart,
        store: TaskStore,
        spec_key: str,
        mcp_tools: Sequence[ToolEntry],
        duplicate: bool,
    ) -> LiveSession:
        record = start.record
        key = (record.tenant, record.session_id)
        if not duplicate:
            self._drop(key)
        if duplicate:
            agent = self._build(record.spec, mcp_tools)
        else:
            agent = self._agent(record, spec_key, mcp_tools)
        agent.reset(record.session_id)
        offsets: dict[str, int] = {}
        main = start.memories.get("memory")
        read_whole = main is not None and main.offset == 0  # the compaction came along
        compacted = start.compaction if read_whole else await store.compaction(*key)
        for path, memory in agent.named_memories().items():
            tail = start.memories.get(path)
            if tail is not None and tail.offset == 0:  # the whole memory came with the step
                messages = tail.messages
            else:
                messages = await store.memory(*key, path)
            offsets[path] = len(messages)
            if path == "memory" and compacted is not None:  # what a compaction left of it
                upto, summary = compacted
                messages = [summary, *messages[upto:]]
            memory.add(messages, record.session_id)  # fresh from Redis: no copies needed
        live = LiveSession(*key, spec_key, agent, offsets, start.epoch, shared=not duplicate)
        if not duplicate:
            self._sessions[key] = live
            self._evict()
        return live

    def _agent(
        self, record: TaskRecord, spec_key: str, mcp_tools: Sequence[ToolEntry]
    ) -> AsyncAgent:
        key = (record.tenant, spec_key)
        agent = self._agents.get(key)
        if agent is None:
            agent = self._agents[key] = self._build(record.spec, mcp_tools)
            while len(self._agents) > self.max_agents:
                self._agents.popitem(last=False)
        self._agents.move_to_end(key)
        return agent

    def _build(self, spec: AgentSpec, mcp_tools: Sequence[ToolEntry]) -> AsyncAgent:
        agent = self.build(spec)
        if mcp_tools:
            agent.tools = [*(agent.tools or []), *mcp_tools]
        return agent

    def _drop(self, key: tuple[str, str]) -> None:
        live = self._sessions.pop(key, None)
        if live is not None:
            live.agent.reset(live.session_id)

    def _evict(self) -> None:
        if len(self._sessions) <= self.max_sessions:
            return
        for key in list(self._sessions):  # oldest first
            if not self._sessions[key].busy:
                self._drop(key)
            if len(self._sessions) <= self.max_sessions:
                return


def _fits(live: LiveSession, start: StepStart, spec_key: str) -> bool:
    """The warm session can take this step's tails (a tail from 0, or a new epoch: Redis was
    rewritten, by a rollback say, so the session is loaded again, compaction and all)."""
    tails = start.memories
    same = live.spec_key == spec_key and set(tails) == set(live.offsets)
    same = same and live.epoch == start.epoch
    return same and all(t.offset > 0 or live.offsets[p] == 0 for p, t in tails.items())


def _apply_tails(live: LiveSession, start: StepStart) -> None:
    memories = live.agent.named_memories()
    for path, tail in start.memories.items():
        if tail.messages:
            memories[path].add(tail.messages, live.session_id)
        live.offsets[path] = tail.offset + len(tail.messages)
    live.epoch = start.epoch


def _json(values: dict[str, object]) -> str:
    # Sorted keys: the same values give the same text, so unchanged ones are not written.
    return orjson.dumps(values, option=orjson.OPT_SORT_KEYS).decode()


def held(memory: SessionMemory, session_id: str) -> list[AgentMessage]:
    """Every message a memory holds for the session, ignoring any read window."""
    if isinstance(memory, MemoryManager):
        session = memory.get(session_id)
        return session.messages if session is not None else []
    return from_state(memory.save(session_id))
