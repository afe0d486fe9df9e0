"""The browser's failures. Each is an `ActionError`, so the model reads it as the tool's answer.

- `WebFailure` (state HTTP_ERROR): a page or the search backend could not be read: unreachable,
  too slow, an HTTP error status, too many redirects, an answer that does not parse.
- `BlockedAddress` (state API_ERROR): the request guard refused a connection; carries the host,
  the address it resolved to and why that address is refused.
- A plain `ActionError`: what the model asked cannot be done (a ``file:`` URL, an image).
"""

from __future__ import annotations

from taskyard.agentkit.actions.base import ActionError
from taskyard.agentkit.actions.web.addresses import IPAddress
from taskyard.agentkit.schema import ActionStatusCode

__all__ = ["BlockedAddress", "WebFailure"]


class WebFailure(ActionError):
    def __init__(self, message: str) -> None:
        super().__init__(message, ActionStatusCode.HTTP_ERROR)


class BlockedAddress(ActionError):
    def __init__(self, host: str, address: IPAddress, reason: str) -> None:
        where = f"{host} is" if host == str(address) else f"{host} resolves to {address},"
        super().__init__(f"refused to connect: {where} {reason}; only public addresses are opened")
        self.host = host
        self.address = address
        self.reason = reason
