"""What one MCP tool call costs the tool worker, measured here, printed, never asserted:

- a remote call (streamable HTTP through the guard) of the `mcp` SDK's server on loopback
  (tests/mcp_servers.py): each call is one connection (discover, call, and the SDK's listing
  that checks the result's schema);
- a local call of the stdio server (tests/mcp_servers.py's) inside a session's sandbox, its
  messages relayed through cells (the server process starts and stops per call).

    .venv/bin/python bench/mcp_bench.py [--calls 30] [--backend docker|local]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from mcp_servers import STDIO_SERVER, serve_mcp

from taskyard.agentkit.actions.mcp.client import McpClient
from taskyard.agentkit.spec import McpServer
from taskyard.plumbing.settings import ToolWorkerSettings
from taskyard.sandbox import make_sandbox_provider


def _line(what: str, seconds: list[float]) -> str:
    ms = sorted(s * 1000 for s in seconds)
    p95 = ms[min(len(ms) - 1, int(len(ms) * 0.95))]
    return f"{what}: n={len(ms)} p50 {statistics.median(ms):.1f} ms, p95 {p95:.1f} ms"


def remote(calls: int) -> None:
    settings = ToolWorkerSettings(mcp_allow_networks="127.0.0.1/32")
    client = McpClient(settings)
    with serve_mcp() as served:
        server = McpServer(name="weather", url=served.url)

        async def one() -> float:
            started = time.perf_counter()
            ret = await client.call_tool(server, "forecast", {"city": "Oslo"}, "b", "b:1")
            assert ret.errmsg is None, ret.errmsg
            return time.perf_counter() - started

        asyncio.run(one())  # warm: imports, the first connection
        before = len(served.methods)
        times = [asyncio.run(one()) for _ in range(calls)]
        per_call = (len(served.methods) - before) / calls
    print(_line("remote call (loopback, SDK server)", times))
    print(f"  JSON-RPC requests per call: {per_call:g} ({', '.join(served.methods[-3:])})")


def local(calls: int, backend: str) -> None:
    settings = ToolWorkerSettings(sandbox_backend=backend, sandbox_warm_pool=0)
    sandboxes = make_sandbox_provider(settings)
    try:
        client = McpClient(settings, sandboxes)
        key = "bench:mcp"
        started = time.perf_counter()
        sandbox = sandboxes.get(key)
        sandbox.run(f"open('server.py', 'w').write({STDIO_SERVER!r})", 30)
        sandbox.run("open('notes.txt', 'w').write('one two three')", 30)
        took = time.perf_counter() - started
        print(f"sandbox ({backend}) started and files written in {took:.2f} s")
        server = McpServer(name="files", command=["python3", "server.py"])

        def one() -> float:
            started = time.perf_counter()
            ret = asyncio.run(
                client.call_tool(server, "wordcount", {"path": "notes.txt"}, "b", key)
            )
            assert ret.errmsg is None, ret.errmsg
            return time.perf_counter() - started

        one()
        times = [one() for _ in range(calls)]
    finally:
        sandboxes.close_all()
    print(_line(f"local stdio call (in the {backend} sandbox, server started per call)", times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--backend", default="docker", choices=["docker", "local"])
    args = parser.parse_args()
    remote(args.calls)
    local(args.calls, args.backend)


if __name__ == "__main__":
    main()
