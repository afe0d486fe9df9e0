"""The one error an LLM client raises: transport and HTTP errors are translated to it at the
boundary, keeping the HTTP status (None when the server could not be reached)."""

from __future__ import annotations

from taskyard.errors import TaskyardError

__all__ = ["LLMError"]


class LLMError(TaskyardError):
    """A model call failed: the server answered with an error, or could not be reached.

    `code` is the OpenAI error body's (``rate_limit_exceeded``, ``invalid_api_key``, ...) and
    `retry_after` the answer's Retry-After in seconds, where the server gave them."""

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        code: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.code = code
        self.retry_after = retry_after

    @property
    def rate_limited(self) -> bool:
        """The caller's own request or token budget is spent (not a busy server)."""
        return self.status_code == 429 and self.code == "rate_limit_exceeded"

    @property
    def transient(self) -> bool:
        """Worth trying again later: unreachable, rate limited, or a server error."""
        code = self.status_code
        return code is None or code in (408, 409, 429) or code >= 500
