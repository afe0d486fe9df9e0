"""Memory that never overflows the model's context: before a step's call, its prompt is
counted (`taskyard.agentkit.token_count`); past `compaction_share` of the model's window, the oldest
turns are summarised by the model into one message and the newest kept, whole turns only, so a
tool call always travels with its results. Only what the model sees changes: the session's
messages stay in Redis (and in `GET` answers); the summary and how many messages it stands
for are saved beside them (`TaskStore.save_compaction`), so every worker shows the model the
same thing, and a `memory_compacted` event says so.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson

from services.agent_worker.live_agents import LiveSession, held
from taskyard.agentkit.agents.drive import resolve
from taskyard.agentkit.aggregators import ChatMessage, DefaultAggregator
from taskyard.agentkit.schema import AgentMessage, LLMResponse
from taskyard.agentkit.token_count import count_tokens
from taskyard.plumbing.settings import AgentWorkerSettings
from taskyard.runtime.events import EventKind
from taskyard.runtime.store import StepStart, TaskStore

__all__ = ["Compactor", "PromptSize"]

log = logging.getLogger("taskyard.agent_worker")

SUMMARY_PREFIX = "Summary of the earlier conversation: "
_ASK = (
    "Summarise the conversation below for the assistant that continues it. Keep every fact, "
    "number, decision, file name and open question it will need; drop pleasantries. Reply "
    "with the summary only."
)


@dataclass(frozen=True, slots=True)
class PromptSize:
    """A step's prompt in tokens, and the window it must fit (0: unknown)."""

    tokens: int
    window: int


class Compactor:
    """Counts a step's prompt and compacts the session's memory when it is too large."""

    def __init__(
        self,
        store: TaskStore,
        settings: AgentWorkerSettings,
        http: aiohttp.ClientSession | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.http = http
        self._windows: dict[str, int] = {}

    async def fit(self, live: LiveSession, start: StepStart) -> PromptSize:
        """The prompt's size after compacting the memory if it had to be. Counted only where
        the count is used: a known window, or the task's token budget (else 0 tokens)."""
        window = await self.window(start)
        if not window and start.record.spec.max_tokens_total is None:
            return PromptSize(0, 0)
        size = PromptSize(self._count(live, start), window)
        limit = int(window * self.settings.compaction_share)
        if not window or size.tokens <= limit or getattr(live.agent, "llm", None) is None:
            return size
        if not await self._compact(live, start, window, size.tokens):
            return size
        return PromptSize(self._count(live, start), window)

    async def window(self, start: StepStart) -> int:
        spec = start.record.spec
        if spec.context_window:
            return spec.context_window
        model = spec.model or self.settings.default_model
        if model not in self._windows:
            self._windows[model] = await self._reported(model)
        return self._windows[model] or self.settings.default_context_window

    async def _reported(self, model: str) -> int:
        """What the proxy's /v1/models says of the model's context (vLLM: max_model_len)."""
        if self.http is None:
            return 0
        url = self.settings.llm_base_url.rstrip("/") + "/models"
        headers = {"Authorization": f"Bearer {self.settings.llm_api_key}"}
        try:
            async with self.http.get(url, headers=headers, timeout=aiohttp.ClientTimeout(5)) as r:
                models = (await r.json(loads=orjson.loads)).get("data", []) if r.ok else []
        except (aiohttp.ClientError, TimeoutError, ValueError):
            return 0
        for entry in models:
            if entry.get("id") == model:
                return int(entry.get("max_model_len") or entry.get("context_length") or 0)
        return 0

    def _count(self, live: LiveSession, start: StepStart) -> int:
        agent, model = live.agent, self._model(start)
        memory = held(agent.memory, live.session_id) if agent.memory else []
        tools = orjson.dumps(agent.tools).decode() if agent.tools else ""
        extra = count_tokens([{"content": tools}], model) if tools else 0
        aggregator = agent.aggregator
        if not isinstance(aggregator, DefaultAggregator):  # its prompt as a whole, every step
            chat = aggregator.aggregate(
                [*memory, *start.inputs()], agent.name, agent.output_format, agent.system_prompt
            )
            return count_tokens(chat, model) + extra
        # The system part (and any few-shot examples), then message by message: the memory's
        # count is kept and only what it gained is counted, so a long session's step does not
        # count its whole history again. (Consecutive user messages the prompt merges are
        # counted apart: a few framing tokens over, never under.)
        fixed = aggregator.aggregate([], agent.name, agent.output_format, agent.system_prompt)
        inputs = sum(
            count_tokens(aggregator.rendered(m, agent.name), model) for m in start.inputs()
        )
        held_tokens = live.memory_size.count(memory, model, agent.name, aggregator)
        return count_tokens(fixed, model) + held_tokens + inputs + extra

    def _model(self, start: StepStart) -> str:
        return start.record.spec.model or self.settings.default_model

    async def _compact(self, live: LiveSession, start: StepStart, window: int, before: int) -> bool:
        agent, session, memory = live.agent, live.session_id, live.agent.memory
        if memory is None:
            return False  # an agent without memory: only the step's inputs, nothing to cut
        messages = held(memory, session)
        cut = _cut(
            messages, agent, self._model(start), window * self.settings.compaction_keep_share
        )
        if cut <= 1:
            return False  # nothing old enough to summarise without splitting a turn
        summary = await self._summary(agent, messages[:cut], session)
        # The memory is [old summary, Redis messages from its `upto` on] or Redis's from 0.
        prior = await self.store.compaction(live.tenant, session)
        summarised = _is_summary(messages[0]) and prior is not None
        upto = prior[0] + cut - 1 if summarised and prior else cut
        memory.reset(session)
        memory.add([summary, *messages[cut:]], session)
        live.mark()
        await self.store.save_compaction(start.record, upto, summary)  # refused once it ended
        after = self._count(live, start)
        data = {"upto": upto, "before_tokens": before, "after_tokens": after, "window": window}
        await self.store.publish(start.record.id, EventKind.MEMORY_COMPACTED, data)
        log.info("memory compacted", extra={"task_id": start.record.id, "session_id": session})
        return True

    async def _summary(self, agent: Any, old: list[AgentMessage], session: str) -> AgentMessage:
        chat = agent.aggregator.aggregate(old, agent.name, agent.output_format, None)
        transcript = "\n\n".join(f"{m['role']}: {_plain(m)}" for m in chat)
        asked: list[ChatMessage] = [
            {"role": "system", "content": _ASK},
            {"role": "user", "content": transcript},
        ]
        answer = await resolve(agent.llm.chat(asked, session_id=session))
        text = answer.text if isinstance(answer, LLMResponse) else str(answer)
        return AgentMessage(sender="user", content=SUMMARY_PREFIX + text.strip())


def _cut(messages: list[AgentMessage], agent: Any, model: str, keep: float) -> int:
    """Where the kept newest turns start: the earliest user message after which the rest fits
    in `keep` tokens (a turn starts at a user message, so no call is parted from its result)."""
    starts = [i for i, m in enumerate(messages) if m.sender == "user" and not _is_summary(m)]
    for start in starts:
        tail = agent.aggregator.aggregate(messages[start:], agent.name, agent.output_format, None)
        if count_tokens(tail, model) <= keep:
            return start
    return starts[-1] if starts else 0


def _is_summary(message: AgentMessage) -> bool:
    return isinstance(message.content, str) and message.content.startswith(SUMMARY_PREFIX)


def _plain(message: ChatMessage) -> str:
    text = message.get("content") or ""
    if message.get("tool_calls"):
        text += " " + orjson.dumps(message["tool_calls"]).decode()
    return str(text)
