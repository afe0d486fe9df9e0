"""The one error an LLM client raises: transport and HTTP errors are translated to it at the
boundary, keeping the HTTP status (None when the server could not be reached)."""

from __future__ import annotations

__all__ = ["LLMError"]


class LLMError(Exception):
    """A model call failed: the server answered with an error, or could not be reached."""

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code

    @property
    def transient(self) -> bool:
        """Worth trying again later: unreachable, rate limited, or a server error."""
        code = self.status_code
        return code is None or code in (408, 409, 429) or code >= 500
