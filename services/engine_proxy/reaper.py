"""Hand-offs that ended: the proxy removes them.

A worker leaving on a planned exit hands its kernels off (rule 2 of `ownership`); a peer that
attaches to one while it runs takes it over (rule 3). One no peer takes ends when its lease
lapses, and its container, exited, can be taken over by no one, nor removed by anyone but its
maker, which removes its own at its next start only. A maker that never starts again under its
name (a scale-down) would leave them on the engine for good: the proxy, the only process that
opens the engine, removes every ended hand-off of a container made through it, every
`ENGINE_PROXY_REAP_S`.
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import quote

import orjson
import structlog

from services.engine_proxy.engine import Engine
from services.engine_proxy.errors import EngineUnreachable
from services.engine_proxy.holdings import Holdings
from services.engine_proxy.ownership import CALLER_LABEL, HANDOFF_PREFIX, holding

__all__ = ["Reaper"]

log = structlog.stdlib.get_logger(__name__)

# Containers that ran and stopped, named as hand-offs (the engine matches names by part).
_ENDED_HANDOFFS = orjson.dumps({"status": ["exited", "dead"], "name": [HANDOFF_PREFIX]}).decode()


class Reaper:
    """Removes the ended hand-offs of containers made through the proxy."""

    def __init__(self, engine: Engine, holdings: Holdings, every_s: float) -> None:
        self._engine = engine
        self._holdings = holdings
        self._every_s = every_s

    async def run(self) -> None:
        """Reap now and every `every_s`, until cancelled; an engine gone is tried again then."""
        while True:
            try:
                await self.reap()
            except EngineUnreachable as exc:
                log.warning("could not look for ended hand-offs", error=str(exc))
            await asyncio.sleep(self._every_s)

    async def reap(self) -> int:
        """Remove the ended hand-offs there are now; how many were removed."""
        status, listed = await self._engine.call(
            "GET", f"/containers/json?all=1&filters={quote(_ENDED_HANDOFFS)}"
        )
        if status >= 400 or not isinstance(listed, list):
            log.warning("could not list ended hand-offs", status=status)
            return 0
        removed = 0
        for container in filter(_ended_handoff, listed):
            removed += await self._remove(container["Id"])
        return removed

    async def _remove(self, container: str) -> int:
        # Without force: a container started again meanwhile is running, and the engine
        # refuses to remove it (409); a removed one is gone already (404).
        status, _ = await self._engine.call("DELETE", f"/containers/{container}?v=1")
        self._holdings.forget(container)
        if status >= 400:
            log.info("an ended hand-off was not removed", container=container[:12], status=status)
            return 0
        log.info("removed an ended hand-off", container=container[:12])
        return 1


def _ended_handoff(listed: dict[str, Any]) -> bool:
    """Whether a listed container is a hand-off (its exact hand-off name) of one made through
    the proxy, and ended (the list's filter asked for ended ones; asked again here, as the
    name filter matches any name containing the prefix)."""
    labels = listed.get("Labels") or {}
    names = listed.get("Names") or [""]
    handed = holding(listed["Id"], names[0], labels).handed_off
    return handed and CALLER_LABEL in labels and listed.get("State") in ("exited", "dead")
