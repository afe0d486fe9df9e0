"""Whose each container is, as the engine says (`ownership`), kept a short while: a worker's
next request on a container it just made asks the engine nothing more.

What is kept can go stale only by a rename or a removal, and both pass through the proxy,
which forgets the container then; the time limit covers an operator renaming one by hand.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import structlog

from services.engine_proxy.engine import Engine
from services.engine_proxy.errors import Refused
from services.engine_proxy.ownership import Holding, holding, taken_name

__all__ = ["Holdings"]

log = structlog.stdlib.get_logger(__name__)

_KEEP_S = 30.0
_KEPT = 4096  # entries; the oldest go first
_FULL_ID = 64


class Holdings:
    """Holdings by container id, and each exec's container, read through `engine`."""

    def __init__(self, engine: Engine, clock: Callable[[], float] = time.monotonic) -> None:
        self._engine = engine
        self._clock = clock
        self._kept: dict[str, tuple[Holding, float]] = {}
        self._execs: dict[str, str] = {}
        self._taking = asyncio.Lock()

    async def of(self, ref: str) -> Holding:
        """The holding of the container `ref` names (an id, a prefix of one, a name)."""
        if len(ref) == _FULL_ID and (kept := self._kept.get(ref)) and kept[1] > self._clock():
            return kept[0]
        found = await self._inspect(ref)
        return self._keep(holding(found["Id"], found.get("Name", ""), _labels(found)))

    def made(self, container: str, caller: str) -> None:
        """A container `caller` just made (named by the engine, so not handed off)."""
        self._keep(Holding(container, caller, handed_off=False))

    def forget(self, container: str) -> None:
        self._kept.pop(container, None)

    async def container_of_exec(self, exec_id: str) -> str:
        """The id of the container an exec runs in."""
        if (container := self._execs.get(exec_id)) is None:
            status, found = await self._engine.call("GET", f"/exec/{exec_id}/json")
            _passed_on(status, found)
            container = self.exec_made(exec_id, found["ContainerID"])
        return container

    def exec_made(self, exec_id: str, container: str) -> str:
        if len(self._execs) >= _KEPT:
            del self._execs[next(iter(self._execs))]
        self._execs[exec_id] = container
        return container

    async def take_over(self, container: str, taker: str) -> Holding:
        """Rule 3 of `ownership`: rename a running, handed-off container as `taker`'s."""
        async with self._taking:  # the check and the rename, one take-over at a time
            found = await self._inspect(container)
            now = holding(container, found.get("Name", ""), _labels(found))
            if not now.handed_off:
                raise Refused(f"container {container[:12]} is no longer handed off", 409)
            if not (found.get("State") or {}).get("Running"):
                raise Refused(f"container {container[:12]} has ended: nothing to take over", 409)
            name = taken_name(container, taker)
            status, said = await self._engine.call(
                "POST", f"/containers/{container}/rename?name={name}"
            )
            _passed_on(status, said)
        log.info("taken over", container=container[:12], taker=taker, maker=now.owner)
        return self._keep(Holding(container, taker, handed_off=False))

    async def _inspect(self, ref: str) -> dict[str, Any]:
        status, found = await self._engine.call("GET", f"/containers/{ref}/json")
        _passed_on(status, found)
        assert isinstance(found, dict)
        return found

    def _keep(self, held: Holding) -> Holding:
        if len(self._kept) >= _KEPT:
            del self._kept[next(iter(self._kept))]
        self._kept[held.container] = (held, self._clock() + _KEEP_S)
        return held


def _labels(found: dict[str, Any]) -> dict[str, str]:
    labels: dict[str, str] = (found.get("Config") or {}).get("Labels") or {}
    return labels


def _passed_on(status: int, said: Any) -> None:
    """Pass an error of the engine's on to the worker as the engine said it (a 404 stays a
    404: the Docker SDK raises NotFound)."""
    if status >= 400:
        message = said.get("message") if isinstance(said, dict) else None
        raise Refused(str(message or f"the engine answered {status}"), status, from_engine=True)
