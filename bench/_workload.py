"""What the benchmark sends: one small chat for overhead, multi-turn sessions for routing.

Requests are plain dicts for `_loadgen.py`: ``{"path", "body", "headers"}``.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

__all__ = ["SessionMix", "chat_request", "session_lanes"]

_CHAT_PATH = "/v1/chat/completions"


def chat_request(
    model: str, messages: list[dict[str, str]], stream: bool, headers: dict[str, str]
) -> dict[str, Any]:
    """One chat completion request; streams ask for usage as agent workers do."""
    body: dict[str, Any] = {"model": model, "messages": messages, "max_tokens": 64}
    if stream:
        body.update(stream=True, stream_options={"include_usage": True})
    return {"path": _CHAT_PATH, "body": json.dumps(body), "headers": headers}


@dataclass(frozen=True, slots=True)
class SessionMix:
    """Agent-like sessions: a few shared system prompts, turns that append tool output."""

    sessions: int
    turns: int = 8
    system_prompts: int = 3
    system_words: int = 160
    user_words: int = 30
    tool_words: int = 200
    answer_words: int = 30
    seed: int = 7

    def mean_prompt_words(self) -> float:
        """The prompt size averaged over a session's turns (a role word per message)."""
        per_turn = self.user_words + self.answer_words + self.tool_words + 3
        return self.system_words + 2 + (self.turns - 1) / 2 * per_turn

    def describe(self) -> str:
        return (
            f"{self.sessions} sessions x {self.turns} turns, {self.system_prompts} shared system "
            f"prompts of {self.system_words} words; each turn adds {self.user_words} user + "
            f"{self.tool_words} tool-output + {self.answer_words} answer words"
        )


def session_lanes(
    mix: SessionMix, model: str, headers: dict[str, str]
) -> list[list[dict[str, Any]]]:
    """One lane per session: its turns in order, each resending the whole history."""
    rng = random.Random(mix.seed)
    systems = [_words(rng, mix.system_words) for _ in range(mix.system_prompts)]
    return [
        _session(mix, rng, systems[index % len(systems)], f"bench-session-{index}", model, headers)
        for index in range(mix.sessions)
    ]


def _session(
    mix: SessionMix,
    rng: random.Random,
    system: str,
    session_id: str,
    model: str,
    headers: dict[str, str],
) -> list[dict[str, Any]]:
    history = [{"role": "system", "content": system}]
    lane = []
    for _ in range(mix.turns):
        history.append({"role": "user", "content": _words(rng, mix.user_words)})
        lane.append(chat_request(model, history, True, {**headers, "x-session-id": session_id}))
        # What the agent loop appends before the next model call: the answer, the tool's output.
        history.append({"role": "assistant", "content": _words(rng, mix.answer_words)})
        history.append({"role": "tool", "content": _words(rng, mix.tool_words)})
    return lane


def _words(rng: random.Random, count: int) -> str:
    return " ".join(f"w{rng.randrange(50_000)}" for _ in range(count))
