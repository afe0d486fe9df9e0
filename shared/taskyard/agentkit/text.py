"""Text every store can hold. A Python string may carry lone UTF-16 surrogates (``"\\ud800"``
from `json.loads`, or printed by sandboxed code), which UTF-8, orjson and pydantic all refuse
to encode. Text from outside (tool output, model output) passes through here where it becomes
a message, so nothing downstream fails on it."""

from __future__ import annotations

from typing import Any

__all__ = ["replace_lone_surrogates"]


def replace_lone_surrogates(value: Any) -> Any:
    """`value` with every unpaired surrogate in its strings (dict keys too) replaced by U+FFFD;
    a surrogate pair becomes its character. Other values are returned as they are."""
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, dict):
        return {replace_lone_surrogates(k): replace_lone_surrogates(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(replace_lone_surrogates(item) for item in value)
    return value


def _text(text: str) -> str:
    try:
        text.encode()
    except UnicodeEncodeError:
        # UTF-16 pairs surrogates back up; what stays unpaired cannot decode and is replaced.
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text
