"""`BaseAgent`: the one core every agent runs, sync or async, streamed or not.

`_run` is the whole of an agent call, written once: it checks the call's keywords at once,
then runs an async generator: before hooks, memory add of the inputs, `forward`, the reply
wrapped into an `AgentMessage`, memory add of the reply, after hooks. It yields ``STREAM_ING``
messages while a streaming `forward` produces text, then the one ``END`` reply. `Agent` and
`AsyncAgent` only choose how to drive it.

Hooks follow Lagent: a falsy return keeps the messages, a message (or, before, a sequence of
messages) replaces them, and anything else is a `TypeError` saying what is allowed.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Sequence
from enum import Enum
from typing import Any

from pydantic import ValidationError

from taskyard.agentkit.agents.drive import aiter_any, resolve, stream_of
from taskyard.agentkit.agents.errors import AgentError, EmptyReplyError
from taskyard.agentkit.agents.node import AgentNode
from taskyard.agentkit.agents.params import Keywords, check_keywords, declared_keywords, llm_params
from taskyard.agentkit.aggregators import ChatMessage, DefaultAggregator, SystemPrompt
from taskyard.agentkit.hooks import Hook, RemovableHandle
from taskyard.agentkit.llms import AsyncChatModel, ChatModel, ChatResult
from taskyard.agentkit.memory import Memory, MemoryManager, SessionId, SessionMemory
from taskyard.agentkit.parsers.base import OutputParser
from taskyard.agentkit.schema import AgentMessage, AgentStatusCode, LLMResponse

__all__ = ["AgentInput", "BaseAgent"]

AgentInput = AgentMessage | str | Sequence[AgentMessage | str]


class _Default(Enum):
    MEMORY = "a fresh MemoryManager"


class BaseAgent(AgentNode):
    """Shared state and the call core; subclass `Agent` or `AsyncAgent`, not this.

    Args:
        llm: the model client (`OpenAIChat` for `Agent`, `AsyncOpenAIChat` for `AsyncAgent`).
        name: the sender name of this agent's messages; the class name by default.
        system_prompt: a string, or chat messages to put first.
        memory: per-session memory; a fresh `MemoryManager` by default; None for no memory
            (each call then sees only its own inputs, and `state_dict` has no ``memory`` key).
        output_format: the parser whose result goes into the reply's `formatted`.
        aggregator: memory to chat messages; `DefaultAggregator` by default.
        tools: OpenAI ``tools`` entries offered to the model on every call.
        hooks: hooks to register at once.
        description: what this agent does (for agents that pick sub-agents).
    """

    def __init__(
        self,
        llm: ChatModel | AsyncChatModel | None = None,
        *,
        name: str | None = None,
        system_prompt: SystemPrompt | None = None,
        memory: SessionMemory | _Default | None = _Default.MEMORY,
        output_format: OutputParser | None = None,
        aggregator: DefaultAggregator | None = None,
        tools: list[dict[str, Any]] | None = None,
        hooks: Iterable[Hook] = (),
        description: str | None = None,
    ) -> None:
        _refuse_configs(llm=llm, memory=memory, output_format=output_format, aggregator=aggregator)
        self.name = name or type(self).__name__
        self.llm = llm
        self.system_prompt = system_prompt
        self.memory = MemoryManager() if memory is _Default.MEMORY else _checked_memory(memory)
        self.output_format = output_format
        self.aggregator = aggregator or DefaultAggregator()
        self.tools = tools
        self.description = description
        self._hooks: dict[int, Hook] = {}
        for hook in hooks:
            self.register_hook(hook)

    def register_hook(self, hook: Hook) -> RemovableHandle:
        """Run `hook` around every call of this agent; the handle removes it."""
        _check_hook(hook)
        handle = RemovableHandle(self._hooks)
        self._hooks[handle.id] = hook
        return handle

    # Untyped here so each subclass declares its own keywords (a type checker takes
    # ``*args: Any, **kwargs: Any`` as "any signature").
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """``forward(*messages, session_id=..., **keywords)``: one reply to `messages` (fresh
        `AgentMessage`s): an `AgentMessage` or content, or (streaming) a generator of text so
        far ending with the reply. Override this, not `__call__`.

        The keywords it declares are the ones a call accepts (see
        `taskyard.agentkit.agents.params`)."""
        raise NotImplementedError

    def call_keywords(self) -> Keywords:
        """The keywords a call accepts besides `session_id` (None: any): `forward`'s."""
        return declared_keywords(type(self).forward)

    def to_message(self, response: ChatResult) -> AgentMessage:
        """A model turn as this agent's message: raw text in `content`, parsed in `formatted`."""
        text = response if isinstance(response, str) else response.text
        extra = None
        if isinstance(response, LLMResponse):
            extra = {"finish_reason": response.finish_reason, "usage": response.usage}
        return AgentMessage(
            sender=self.name, content=text, formatted=self._parse(response), extra_info=extra
        )

    def prompt(self, messages: Sequence[AgentMessage], session_id: SessionId) -> list[ChatMessage]:
        """The chat messages for the model: the session's memory, aggregated."""
        history = self.memory.get_memory(session_id) if self.memory is not None else messages
        return self.aggregator.aggregate(history, self.name, self.output_format, self.system_prompt)

    # The core, written once.

    def _run(
        self, messages: tuple[AgentInput, ...], session_id: SessionId, kwargs: dict[str, Any]
    ) -> AsyncGenerator[AgentMessage, None]:
        # Checked here, when the call is made, so a bad keyword changes nothing.
        check_keywords(f"{self!r} call", kwargs, self.call_keywords())
        return self._steps(messages, session_id, kwargs)

    async def _steps(
        self, messages: tuple[AgentInput, ...], session_id: SessionId, kwargs: dict[str, Any]
    ) -> AsyncGenerator[AgentMessage, None]:
        inputs = await self._before(as_inputs(messages), session_id)
        self._remember(inputs, session_id)
        last: Any = _NOTHING
        async for item, streamed in stream_of(
            self.forward(*inputs, session_id=session_id, **kwargs)
        ):
            last = item
            if streamed and _is_partial(item):
                yield self._partial(item)
        reply = self._as_reply(last)
        self._remember([reply], session_id)
        yield await self._after(reply.model_copy(deep=True), session_id)

    async def _reply(
        self, messages: tuple[AgentInput, ...], session_id: SessionId, kwargs: dict[str, Any]
    ) -> AgentMessage:
        reply: AgentMessage | None = None
        async for message in self._run(messages, session_id, kwargs):
            reply = message
        assert reply is not None  # _run always ends with the reply
        return reply

    async def _before(
        self, inputs: list[AgentMessage], session_id: SessionId
    ) -> list[AgentMessage]:
        for hook in list(self._hooks.values()):
            inputs = _replaced_inputs(
                await resolve(hook.before_agent(self, inputs, session_id)), inputs
            )
        return inputs

    async def _after(self, reply: AgentMessage, session_id: SessionId) -> AgentMessage:
        # `reply` is a copy: hooks must not edit what memory holds.
        for hook in list(self._hooks.values()):
            reply = _replaced_reply(await resolve(hook.after_agent(self, reply, session_id)), reply)
        return reply

    # The default forward bodies, shared by the sync and async agents.

    async def _generate(
        self, messages: Sequence[AgentMessage], session_id: SessionId, kwargs: dict[str, Any]
    ) -> AgentMessage:
        llm = self._llm()
        chat = self.prompt(messages, session_id)
        reply = llm.chat(chat, session_id=session_id, **self._llm_args(kwargs))
        response: ChatResult = await resolve(reply)
        return self.to_message(response)

    async def _generate_stream(
        self, messages: Sequence[AgentMessage], session_id: SessionId, kwargs: dict[str, Any]
    ) -> AsyncIterator[str | AgentMessage]:
        llm = self._llm()
        chat = self.prompt(messages, session_id)
        snapshots = llm.stream_chat(chat, session_id=session_id, **self._llm_args(kwargs))
        last, shown = None, ""
        async for last in aiter_any(snapshots):
            text = last if isinstance(last, str) else last.text
            if text != shown:
                shown = text
                yield text
        if last is None:
            raise EmptyReplyError(f"{self.name}: the model stream ended without a turn")
        yield self.to_message(last)

    def _llm(self) -> ChatModel | AsyncChatModel:
        if self.llm is None:
            raise AgentError(f"{self.name} has no llm: pass one, or override forward")
        return self.llm

    def _llm_args(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        params = llm_params(f"{self!r} forward", kwargs)
        return {**params, "tools": self.tools} if self.tools else params

    def _parse(self, response: ChatResult) -> Any:
        if self.output_format is not None:
            return self.output_format.parse_response(response)
        # No parser: still keep native tool calls, in the shape the schema prescribes.
        if isinstance(response, LLMResponse) and response.tool_calls:
            return {"tool_calls": [call.model_dump() for call in response.tool_calls]}
        return None

    def _remember(self, messages: list[AgentMessage], session_id: SessionId) -> None:
        if self.memory is not None:
            self.memory.add(copy.deepcopy(messages), session_id)

    def _partial(self, item: str | AgentMessage) -> AgentMessage:
        if isinstance(item, AgentMessage):
            return item.model_copy(deep=True)
        return AgentMessage(sender=self.name, content=item, stream_state=AgentStatusCode.STREAM_ING)

    def _as_reply(self, value: Any) -> AgentMessage:
        if value is _NOTHING:
            raise EmptyReplyError(f"{self.name}.forward produced no reply")
        if isinstance(value, AgentMessage):
            return value.model_copy(update={"stream_state": AgentStatusCode.END})
        try:
            return AgentMessage(sender=self.name, content=value)
        except ValidationError:
            raise TypeError(
                f"{self.name}.forward returned {type(value).__name__}; return an AgentMessage, "
                "text, a dict, an ActionReturn or a list"
            ) from None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


_NOTHING = object()


def as_inputs(messages: Iterable[Any]) -> list[AgentMessage]:
    """Call inputs as fresh messages: a str is a user message, lists are flattened."""
    inputs: list[AgentMessage] = []
    for item in messages:
        if isinstance(item, list | tuple):
            inputs.extend(as_inputs(item))
        elif isinstance(item, AgentMessage):
            inputs.append(item.model_copy(deep=True))
        elif isinstance(item, str):
            inputs.append(AgentMessage(sender="user", content=item))
        else:
            raise TypeError(f"agents take AgentMessage or str inputs, not {type(item).__name__}")
    return inputs


def _refuse_configs(**components: Any) -> None:
    # Lagent built components from dict(type=...) configs no checker can follow; we take objects.
    for role, value in components.items():
        if isinstance(value, dict | str | type):
            raise TypeError(
                f"{role} must be a constructed object (e.g. OpenAIChat(...)), not {value!r:.60}"
            )


def _checked_memory(memory: Any) -> SessionMemory | None:
    if memory is None or isinstance(memory, SessionMemory):
        return memory
    if isinstance(memory, Memory):
        raise TypeError(
            "memory=Memory(...) holds a single session, but an agent keeps one per session_id: "
            "pass MemoryManager() (MemoryManager(recent_n=N) for a window), or None for no memory"
        )
    raise TypeError(
        f"memory must be per-session (MemoryManager(), RedisMemory(...)) or None, "
        f"not {type(memory).__name__}"
    )


def _check_hook(hook: Any) -> None:
    if isinstance(hook, Hook):
        return
    hint = "; an ActionHook goes to an executor's register_hook" if _is_action_hook(hook) else ""
    raise TypeError(
        f"agents take taskyard.agentkit.hooks.Hook objects (before_agent, after_agent), "
        f"not {type(hook).__name__}{hint}"
    )


def _is_action_hook(hook: Any) -> bool:
    return hasattr(hook, "before_action") or hasattr(hook, "after_action")


def _is_partial(item: Any) -> bool:
    if isinstance(item, AgentMessage):
        return item.stream_state == AgentStatusCode.STREAM_ING
    return isinstance(item, str)


# Hook returns, as in Lagent: a falsy value keeps the messages; a message replaces them.


def _replaced_inputs(value: Any, inputs: list[AgentMessage]) -> list[AgentMessage]:
    if not value:
        return inputs
    if isinstance(value, AgentMessage):
        return [value]
    if _is_message_sequence(value):
        return list(value)
    raise TypeError(
        "a before_agent hook returns an AgentMessage or a sequence of them (the new inputs), or a "
        f"falsy value to keep the inputs; it returned {value!r:.80}"
    )


def _is_message_sequence(value: Any) -> bool:
    if isinstance(value, str) or not isinstance(value, Sequence):
        return False
    return all(isinstance(m, AgentMessage) for m in value)


def _replaced_reply(value: Any, reply: AgentMessage) -> AgentMessage:
    if not value:
        return reply
    if isinstance(value, AgentMessage):
        return value
    raise TypeError(
        "an after_agent hook returns an AgentMessage (the new reply), or a falsy value to keep "
        f"the reply; it returned {value!r:.80}"
    )
