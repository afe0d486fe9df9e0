"""`python -m services.llm_proxy`: serve the proxy; flags override the TASKYARD_ settings."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
from typing import Any

import uvloop

from services.llm_proxy.app import ProxyApp
from services.llm_proxy.routing.policies import POLICIES
from services.llm_proxy.settings import ProxySettings
from taskyard.plumbing.logs import setup_logging
from taskyard.plumbing.tracing import setup_tracing


def _arguments() -> argparse.Namespace:
    defaults = ProxySettings()
    parser = argparse.ArgumentParser(
        prog="python -m services.llm_proxy",
        description="OpenAI-compatible proxy in front of model replicas (vLLM or any "
        "OpenAI-compatible server). Settings come from TASKYARD_* variables; flags win.",
    )
    parser.add_argument("--host", default=defaults.proxy_host)
    parser.add_argument("--port", type=int, default=defaults.proxy_port, help="0: a free port")
    parser.add_argument(
        "--upstreams",
        default=None,
        help='replicas as "url" or "model=url", comma-separated (TASKYARD_PROXY_UPSTREAMS)',
    )
    parser.add_argument("--pool-file", default=None, help="YAML pool (TASKYARD_PROXY_POOL_FILE)")
    parser.add_argument(
        "--policy",
        choices=sorted(POLICIES),
        default=None,
        help=f"routing policy (default {defaults.proxy_policy})",
    )
    return parser.parse_args()


def _settings(args: argparse.Namespace) -> ProxySettings:
    overrides: dict[str, Any] = {"proxy_host": args.host, "proxy_port": args.port}
    if args.upstreams is not None:
        overrides["proxy_upstreams"] = args.upstreams
    if args.pool_file is not None:
        overrides["proxy_pool_file"] = args.pool_file
    if args.policy is not None:
        overrides["proxy_policy"] = args.policy
    return ProxySettings(**overrides)


async def _serve(settings: ProxySettings) -> None:
    app = ProxyApp(settings, tracing=setup_tracing("llm_proxy", settings, libraries=False))
    port = await app.start()
    logging.getLogger("services.llm_proxy").info(
        "listening on %s:%d, %d replicas, policy %s",
        settings.proxy_host,
        port,
        len(app.pool.replicas),
        settings.proxy_policy,
    )
    # A parent that asked for port 0 reads this line to learn the port.
    print(f"listening on http://{settings.proxy_host}:{port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await app.stop()


def main() -> None:
    args = _arguments()
    setup_logging("llm_proxy")
    uvloop.run(_serve(_settings(args)))


if __name__ == "__main__":
    main()
