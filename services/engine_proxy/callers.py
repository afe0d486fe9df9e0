"""Who is calling: the tool worker whose token a request carries.

Each worker has a token of its own (`TASKYARD_ENGINE_PROXY_CALLERS` here, its
`TASKYARD_SANDBOX_ENGINE_TOKEN` there), sent in the `X-Taskyard-Engine-Token` header on every
request (the docker CLI sends it from `DOCKER_CONFIG`'s config.json, "HttpHeaders"). Tokens are
kept and compared as SHA-256 digests, so a lookup takes the same time whatever the token's
first bytes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from services.engine_proxy.errors import Refused

__all__ = ["TOKEN_HEADER", "Callers"]

TOKEN_HEADER = "X-Taskyard-Engine-Token"  # the docker sandbox's too (a test keeps them equal)


class Callers:
    """The workers the proxy knows, by token."""

    def __init__(self, names_by_token: Mapping[str, str]) -> None:
        self._names = {_digest(token): name for token, name in names_by_token.items()}

    def identify(self, headers: Mapping[str, str]) -> str:
        """The calling worker's name; `Refused` (401) without a known token."""
        token = headers.get(TOKEN_HEADER.lower())
        if token is None:
            raise Refused(f"no {TOKEN_HEADER} header: the engine proxy serves tool workers", 401)
        name = self._names.get(_digest(token))
        if name is None:
            raise Refused(f"the {TOKEN_HEADER} is not a tool worker's", 401)
        return name

    def __len__(self) -> int:
        return len(self._names)


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()
