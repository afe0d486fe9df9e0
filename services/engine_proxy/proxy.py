"""`EngineProxy`: listens where the workers' `DOCKER_HOST` points, serves each connection with
a `Relay`, and wires the parts from the settings."""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
from pathlib import Path
from urllib.parse import urlsplit

from services.engine_proxy.callers import Callers
from services.engine_proxy.create import Limits
from services.engine_proxy.engine import Engine
from services.engine_proxy.gate import Gate
from services.engine_proxy.holdings import Holdings
from services.engine_proxy.reaper import Reaper
from services.engine_proxy.relay import Relay
from services.engine_proxy.settings import EngineProxySettings
from services.engine_proxy.wire import MAX_HEAD

__all__ = ["EngineProxy"]


class EngineProxy:
    """The engine proxy of `settings`: `start` it, give workers `address`, `close` it."""

    def __init__(self, settings: EngineProxySettings) -> None:
        callers = settings.callers()
        if not callers:
            raise ValueError("TASKYARD_ENGINE_PROXY_CALLERS names no worker: none could use it")
        self._listen = urlsplit(settings.engine_proxy_listen)
        self._engine = Engine(settings.engine_proxy_engine)
        holdings = Holdings(self._engine)
        gate = Gate(self._engine, holdings, Limits.from_settings(settings))
        relay = Relay(Callers(callers), gate, self._engine, settings.engine_proxy_max_body_bytes)
        self._serve = relay.serve
        self._reaper = Reaper(self._engine, holdings, settings.engine_proxy_reap_s)
        self._reaping: asyncio.Task[None] | None = None
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self.address = settings.engine_proxy_listen

    async def start(self) -> str:
        """Listen; the address workers reach it by, as a `DOCKER_HOST` (a tcp port 0 made
        real)."""
        if self._listen.scheme == "unix":
            path = Path(self._listen.path)
            _clear_socket(path)
            self._server = await asyncio.start_unix_server(self._track, path, limit=MAX_HEAD)
        else:
            host, port = self._listen.hostname, self._listen.port
            self._server = await asyncio.start_server(self._track, host, port, limit=MAX_HEAD)
            port = self._server.sockets[0].getsockname()[1]
            self.address = f"tcp://{host}:{port}"
        self._reaping = asyncio.create_task(self._reaper.run())
        return self.address

    async def close(self) -> None:
        """Stop listening and end every connection (hijacked streams too)."""
        if self._server is not None:
            self._server.close()
        if self._reaping is not None:
            self._reaping.cancel()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.wait(self._connections, timeout=2.0)
        await self._engine.close()

    async def _track(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            await self._serve(reader, writer)
        except asyncio.CancelledError:
            # Closed by `close`: the connection's task ends here, quietly (asyncio's stream
            # server logs a cancelled handler as an error on Python 3.11).
            writer.close()
        finally:
            self._connections.discard(task)


def _clear_socket(path: Path) -> None:
    """Make way for the listening socket: its directory, and no stale socket of a former run
    (but never a file that is not a socket)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISSOCK(os.stat(path).st_mode):
            path.unlink()
