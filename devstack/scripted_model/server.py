"""Starting the scripted model: in the current event loop, in a background thread, or forever."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from types import TracebackType

import uvloop

from devstack.scripted_model.app import ScriptedApp
from devstack.scripted_model.options import ScriptedOptions
from devstack.scripted_model.responder import Responder
from taskyard.http1 import HttpServer, listen_socket

__all__ = ["ScriptedModelThread", "ScriptedServer", "serve", "start_server"]

_MAX_BODY = 64 * 1024 * 1024  # past it, a 413: long prompts are the point of some tests


class ScriptedServer:
    """A listening scripted model in the running event loop."""

    def __init__(self, app: ScriptedApp, server: HttpServer, address: tuple[str, int]) -> None:
        self.app = app
        self.host, self.port = address
        self._server = server

    @property
    def base_url(self) -> str:
        """The OpenAI base URL clients use (``.../v1``)."""
        return f"http://{self.host}:{self.port}/v1"

    async def close(self) -> None:
        """Stop listening and drop every open connection."""
        await self._server.close()


async def start_server(
    options: ScriptedOptions | None = None, host: str = "127.0.0.1", port: int = 0
) -> ScriptedServer:
    """Listen on host:port (0 picks a free port) and answer as the scripted model."""
    sock = listen_socket(host, port)
    bound_port: int = sock.getsockname()[1]
    app = ScriptedApp(options or ScriptedOptions(), replica=str(bound_port))
    server = HttpServer(Responder(app, [(b"x-scripted-replica", b"%d" % bound_port)]), _MAX_BODY)
    await server.start(sock)
    return ScriptedServer(app, server, (host, bound_port))


async def serve(
    options: ScriptedOptions,
    host: str,
    port: int,
    on_ready: Callable[[ScriptedServer], None] | None = None,
) -> None:
    """Run the scripted model until cancelled; `on_ready` hears the bound server first."""
    server = await start_server(options, host, port)
    if on_ready is not None:
        on_ready(server)
    try:
        await asyncio.Event().wait()
    finally:
        await server.close()


class ScriptedModelThread:
    """The scripted model on its own uvloop in a daemon thread, for tests and sync callers.

    Use as a context manager; `server` (with `port`, `base_url`, `app`) is set once started.
    """

    def __init__(
        self, options: ScriptedOptions | None = None, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self._options = options or ScriptedOptions()
        self._address = (host, port)
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="scripted-model", daemon=True)
        # Set by the thread before `_ready`: its loop, the event that stops it, the server.
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped: asyncio.Event | None = None
        self._error: BaseException | None = None
        self.server: ScriptedServer | None = None

    @property
    def base_url(self) -> str:
        return self._started().base_url

    @property
    def port(self) -> int:
        return self._started().port

    def start(self) -> ScriptedModelThread:
        """Start the thread and wait until the server listens (re-raising a start failure)."""
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error
        return self

    def stop(self) -> None:
        """Close the server and join the thread; stopping twice, or before a start, is a no-op."""
        if not self._thread.is_alive():
            return
        if self._loop is not None and self._stopped is not None:
            self._loop.call_soon_threadsafe(self._stopped.set)
        self._thread.join()

    def __enter__(self) -> ScriptedModelThread:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _started(self) -> ScriptedServer:
        if self.server is None:
            raise RuntimeError("the scripted model thread is not started")
        return self.server

    def _run(self) -> None:
        self._loop = uvloop.new_event_loop()
        try:
            self._loop.run_until_complete(self._main())
        finally:
            self._loop.close()

    async def _main(self) -> None:
        self._stopped = asyncio.Event()
        try:
            self.server = await start_server(self._options, *self._address)
        except BaseException as error:
            self._error = error
            self._ready.set()
            return
        self._ready.set()
        await self._stopped.wait()
        await self.server.close()
