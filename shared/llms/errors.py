"""The one error an LLM client raises: the SDK's errors are translated here, at the boundary."""

from __future__ import annotations

import openai

__all__ = ["LLMError"]


class LLMError(Exception):
    """A model call failed: the server answered with an error, or could not be reached."""

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code

    @classmethod
    def from_openai(cls, exc: openai.OpenAIError) -> LLMError:
        """Translate an `openai` SDK error, keeping the HTTP status where there is one."""
        status = getattr(exc, "status_code", None)
        return cls(f"model call failed: {exc}", status_code=status)
