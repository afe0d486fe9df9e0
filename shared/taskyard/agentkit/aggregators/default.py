"""The default aggregator: memory to OpenAI chat messages, with Lagent's semantics.

System messages first (the system prompt, with the parser's format instruction appended);
messages from the agent itself (``sender == name``) become ``assistant``; every other sender
becomes ``user``, and consecutive user messages are merged into one. A ``tool`` message whose
call no earlier message announces (a `recent_n` window cut it off, a compaction summarised
it) is dropped: OpenAI-compatible servers reject a tool message without its call.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from taskyard.agentkit.parsers.base import OutputParser
from taskyard.agentkit.schema import ActionReturn, AgentMessage

__all__ = ["ChatMessage", "DefaultAggregator", "SystemPrompt", "content_text"]

ChatMessage = dict[str, Any]
SystemPrompt = str | ChatMessage | list[ChatMessage]
_Rendered = tuple["weakref.ref[AgentMessage]", str, list[ChatMessage]]


@dataclass(slots=True)
class _Body:
    """A body made for messages starting at `first`: how many, the last one, for whom."""

    first: weakref.ref[AgentMessage]
    last: weakref.ref[AgentMessage]
    count: int
    name: str
    chat: list[ChatMessage]
    calls: set[str]  # the ids of the tool calls announced in `chat`

    def continues(self, messages: Sequence[AgentMessage], name: str) -> bool:
        """Whether `messages` start with the very messages this body was made of."""
        return (
            name == self.name
            and len(messages) >= self.count
            and self.first() is messages[0]
            and self.last() is messages[self.count - 1]
        )


class DefaultAggregator:
    """Turns a session's messages into the ``messages`` of a chat completion request.

    Subclasses usually override `render` (one memory message to chat messages) or wrap
    `aggregate` (see `FewShotAggregator`).
    """

    user_separator = "\n"

    def aggregate(
        self,
        messages: Sequence[AgentMessage],
        name: str,
        parser: OutputParser | None = None,
        system_prompt: SystemPrompt | None = None,
    ) -> list[ChatMessage]:
        """The chat messages for `messages` as seen by the agent called `name`."""
        chat = self.system_messages(system_prompt, parser)
        body = self._body(messages, name)
        if body:  # joined as if appended one by one: a leading user entry may merge
            self._append(chat, body[0])
            chat.extend(body[1:])
        return chat

    def _body(self, messages: Sequence[AgentMessage], name: str) -> list[ChatMessage]:
        """The chat messages of `messages`, continued from the last body made for the same
        first messages (a session's memory only grows between steps), so a long session's
        step renders, merges and checks only what is new."""
        bodies: dict[int, _Body] = self.__dict__.setdefault("_bodies", {})
        first = messages[0] if messages else None
        key = id(first)
        known = bodies.get(key)
        done, body, calls = 0, [], set()
        if known is not None and known.continues(messages, name):
            # Copies: the cached ones stay whole.
            done, body, calls = known.count, list(known.chat), set(known.calls)
        append, rendered = self._append, self.rendered
        for message in messages[done:]:
            for entry in rendered(message, name):
                if _admitted(entry, calls):
                    append(body, entry)
        if first is not None:
            forget = bodies.pop
            anchor = weakref.ref(first, lambda _: forget(key, None))
            last = weakref.ref(messages[-1])
            bodies[key] = _Body(anchor, last, len(messages), name, body, calls)
        return body

    def rendered(self, message: AgentMessage, name: str) -> list[ChatMessage]:
        """`render`, remembered for each message still alive: a long session's step renders
        only its new messages (memory's messages are copies nobody edits in place). The
        entries are shared: read them, do not edit them."""
        rendered: dict[int, _Rendered] = self.__dict__.setdefault("_rendered", {})
        key = id(message)
        cached = rendered.get(key)
        if cached is not None and cached[0]() is message and cached[1] == name:
            return cached[2]
        entries = self.render(message, name)
        forget = rendered.pop
        rendered[key] = (weakref.ref(message, lambda _: forget(key, None)), name, entries)
        return entries

    def render(self, message: AgentMessage, name: str) -> list[ChatMessage]:
        """The chat messages for one memory message."""
        role = "assistant" if message.sender == name else "user"
        return [{"role": role, "content": content_text(message.content)}]

    def system_messages(
        self, system_prompt: SystemPrompt | None, parser: OutputParser | None
    ) -> list[ChatMessage]:
        """The leading system messages; the parser's instruction joins the first one."""
        chat = _as_chat(system_prompt)
        instruction = parser.format_instruction() if parser else None
        if instruction and chat and chat[0]["role"] == "system":
            chat[0] = {**chat[0], "content": f"{chat[0]['content']}\n\n{instruction}"}
        elif instruction:
            chat.insert(0, {"role": "system", "content": instruction})
        return chat

    def _append(self, chat: list[ChatMessage], entry: ChatMessage) -> None:
        last = chat[-1] if chat else None
        if entry["role"] == "user" and last is not None and _plain_user(last):
            # A new entry, not an edit of `last`: rendered entries are shared (see render cache).
            chat[-1] = {
                **last,
                "content": f"{last['content']}{self.user_separator}{entry['content']}",
            }
        else:
            chat.append(entry)


def _admitted(entry: ChatMessage, calls: set[str]) -> bool:
    """Whether `entry` may follow entries announcing the tool calls `calls` (an orphan tool
    message may not: see the module's docstring); its own calls join `calls`."""
    role = entry["role"]
    if role == "tool":
        return entry.get("tool_call_id") in calls
    if role == "assistant" and entry.get("tool_calls"):
        calls.update(call["id"] for call in entry["tool_calls"])
    return True


def content_text(content: Any) -> str:
    """Message content as text for a model: tool results by their text, structures as JSON."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, ActionReturn):
        return content.errmsg if content.errmsg else content.format_result()
    return json.dumps(content, ensure_ascii=False, default=str)


def _plain_user(message: ChatMessage) -> bool:
    return message["role"] == "user" and isinstance(message.get("content"), str)


def _as_chat(system_prompt: SystemPrompt | None) -> list[ChatMessage]:
    if system_prompt is None:
        return []
    if isinstance(system_prompt, str):
        return [{"role": "system", "content": system_prompt}]
    entries = [system_prompt] if isinstance(system_prompt, dict) else list(system_prompt)
    for entry in entries:
        if not (isinstance(entry, dict) and "role" in entry and "content" in entry):
            raise TypeError(f"a system prompt entry needs 'role' and 'content': {entry!r:.80}")
    return [dict(entry) for entry in entries]
