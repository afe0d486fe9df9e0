"""`python -m services.engine_proxy`: serve the engine proxy; flags override the TASKYARD_
settings."""

from __future__ import annotations

import argparse
import asyncio
import signal
from typing import Any

import structlog
import uvloop

from services.engine_proxy.proxy import EngineProxy
from services.engine_proxy.settings import EngineProxySettings
from taskyard.plumbing.logs import setup_logging

log = structlog.stdlib.get_logger("services.engine_proxy")


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m services.engine_proxy",
        description="The Docker engine as tool workers may use it: sandbox containers of "
        "their own and nothing else. Settings come from TASKYARD_* variables "
        "(TASKYARD_ENGINE_PROXY_CALLERS names the workers and their tokens); flags win.",
    )
    parser.add_argument(
        "--listen", default=None, help="unix:///path or tcp://host:port, the workers' DOCKER_HOST"
    )
    parser.add_argument("--engine", default=None, help="the engine's socket (unix:///path)")
    return parser.parse_args()


def _settings(args: argparse.Namespace) -> EngineProxySettings:
    overrides: dict[str, Any] = {}
    if args.listen is not None:
        overrides["engine_proxy_listen"] = args.listen
    if args.engine is not None:
        overrides["engine_proxy_engine"] = args.engine
    return EngineProxySettings(**overrides)


async def _serve(proxy: EngineProxy, settings: EngineProxySettings) -> None:
    address = await proxy.start()
    log.info("listening", address=address, engine=settings.engine_proxy_engine)
    # A parent that asked for port 0 reads this line to learn the address.
    print(f"listening on {address}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await proxy.close()


def main() -> None:
    args = _arguments()
    setup_logging("engine_proxy")
    try:
        settings = _settings(args)
        proxy = EngineProxy(settings)
    except ValueError as exc:  # pydantic's ValidationError is one
        raise SystemExit(f"engine proxy: {exc}") from None
    uvloop.run(_serve(proxy, settings))


if __name__ == "__main__":
    main()
