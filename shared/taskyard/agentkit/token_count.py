"""Counting the tokens of what a step sends to the model.

A real tokenizer where one is at hand for the model: tiktoken's encoding for OpenAI model
names (when tiktoken is installed and its encoding files are cached: it cannot download
them where there is no internet), or the model's Hugging Face tokenizer (when `transformers`
is installed and the tokenizer is in the local cache). Otherwise a documented estimate:
one token per 4 characters of text, plus 4 per message for its role and framing (OpenAI's
rule of thumb for English; it errs high on code and low on dense scripts, so budgets and
windows computed from it keep a margin, `AgentRunSettings.compaction_share`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

import orjson

__all__ = ["ESTIMATE", "count_tokens", "tokenizer_for"]

Counter = Callable[[str], int]
_PER_MESSAGE = 4
_CHARS_PER_TOKEN = 4


def _estimate(text: str) -> int:
    return math.ceil(len(text) / _CHARS_PER_TOKEN)


ESTIMATE: Counter = _estimate


@lru_cache(maxsize=64)
def tokenizer_for(model: str) -> Counter:
    """The best counter for `model` this process has (see the module docstring)."""
    for load in (_tiktoken, _hugging_face):
        counter = load(model)
        if counter is not None:
            return counter
    return ESTIMATE


def _tiktoken(model: str) -> Counter | None:
    try:
        import tiktoken

        encoding = tiktoken.encoding_for_model(model)
    except Exception:  # not installed, unknown model, or its encoding cannot be fetched
        return None
    return lambda text: len(encoding.encode(text, disallowed_special=()))


def _hugging_face(model: str) -> Counter | None:
    try:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(model, local_files_only=True)
    except Exception:  # not installed, or not in the local cache
        return None
    return lambda text: len(tokenizer.encode(text, add_special_tokens=False))


def count_tokens(messages: Sequence[dict[str, Any]], model: str) -> int:
    """Tokens of OpenAI chat messages as a model would see them (text, tool calls, framing)."""
    count = tokenizer_for(model)
    total = 0
    for message in messages:
        total += _PER_MESSAGE + count(_text(message.get("content")))
        if message.get("tool_calls"):
            total += count(orjson.dumps(message["tool_calls"]).decode())
    return total


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return orjson.dumps(content).decode()
