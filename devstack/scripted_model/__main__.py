"""`python -m devstack.scripted_model`: run a scripted OpenAI-compatible model server."""

from __future__ import annotations

import argparse
import sys

import uvloop

from devstack.scripted_model.options import PrefixCacheOptions, ScriptedOptions
from devstack.scripted_model.server import ScriptedServer, serve


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m devstack.scripted_model",
        description="A scripted (deterministic, fake) OpenAI-compatible model server for tests, "
        "the demo and benchmarks. It calls IPythonInterpreter, then quotes the tool's result.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8500, help="0 picks a free port")
    parser.add_argument("--model", default="scripted", help="the name /v1/models reports")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="before the first byte")
    parser.add_argument("--tokens-per-s", type=float, default=0.0, help="0 means no pacing")
    parser.add_argument("--prefix-cache", action="store_true", help="model vLLM's prefix cache")
    parser.add_argument("--block-tokens", type=int, default=16, help="prefix cache block size")
    parser.add_argument("--cache-blocks", type=int, default=4096, help="prefix cache capacity")
    parser.add_argument(
        "--uncached-token-ms",
        type=float,
        default=0.05,
        help="time to first token added per uncached prompt token",
    )
    return parser


def _options(args: argparse.Namespace) -> ScriptedOptions:
    cache = None
    if args.prefix_cache:
        cache = PrefixCacheOptions(args.block_tokens, args.cache_blocks, args.uncached_token_ms)
    return ScriptedOptions(
        model=args.model,
        latency_ms=args.latency_ms,
        tokens_per_s=args.tokens_per_s,
        prefix_cache=cache,
    )


def _announce(server: ScriptedServer) -> None:
    # A parent that asked for port 0 reads this line to learn the port.
    print(f"listening on http://{server.host}:{server.port}", flush=True)


def main(argv: list[str] | None = None) -> None:
    """Parse the command line and serve until interrupted."""
    args = _parser().parse_args(argv)
    try:
        uvloop.run(serve(_options(args), args.host, args.port, on_ready=_announce))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
