"""The throughput phase with `wrk` (a C load generator) when it is installed.

On two shared cores a Python client costs the server CPU it needs; wrk costs much less, so it
measures the many-clients phase. Its summary has `_loadgen.py`'s shape for the keys used.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["wrk_available", "wrk_load"]

_SCRIPT = """\
wrk.method = "POST"
wrk.body = {body}
{headers}
"""
_RPS = re.compile(r"Requests/sec:\s+([0-9.]+)")
_TOTAL = re.compile(r"(\d+) requests in")
_PERCENTILE = re.compile(r"^\s+(50|90|99)%\s+([0-9.]+)(us|ms|s)\s*$", re.MULTILINE)
_NON_2XX = re.compile(r"Non-2xx or 3xx responses: (\d+)")
_SOCKET_ERRORS = re.compile(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)")
_TO_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def wrk_available() -> bool:
    return shutil.which("wrk") is not None


def wrk_load(
    url: str, request: dict[str, Any], connections: int, duration_s: float
) -> dict[str, Any]:
    """Run wrk with `request` (a `_loadgen` request dict) against `url` (a root URL)."""
    headers = {"content-type": "application/json", **request.get("headers", {})}
    # The spaces matter: "headers[[" would open a Lua long string.
    lines = "\n".join(f"wrk.headers[ {_lua(k)} ] = {_lua(v)}" for k, v in headers.items())
    seconds = max(1, round(duration_s))
    with tempfile.TemporaryDirectory() as workdir:
        script = Path(workdir) / "post.lua"
        script.write_text(_SCRIPT.format(body=_lua(request["body"]), headers=lines))
        argv = ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--timeout", "30s"]
        ran = subprocess.run(
            [*argv, "--latency", "-s", str(script), url + request["path"]],
            capture_output=True, text=True, timeout=seconds + 60, check=True,
        )  # fmt: skip
    return _summary(ran.stdout)


def _summary(output: str) -> dict[str, Any]:
    errors = _count(_NON_2XX, output) + _count(_SOCKET_ERRORS, output)
    rps = _RPS.search(output)
    latency = {f"p{q}": float(v) * _TO_MS[unit] for q, v, unit in _PERCENTILE.findall(output)}
    return {
        "rps": float(rps.group(1)) if rps else 0.0,
        "ok": _count(_TOTAL, output) - errors,
        "errors": errors,
        "latency_ms": latency,
        "first_byte_ms": {},
    }


def _count(pattern: re.Pattern[str], output: str) -> int:
    match = pattern.search(output)
    return sum(int(number) for number in match.groups()) if match else 0


def _lua(text: str) -> str:
    # Lua long brackets need no escaping as long as the text holds no "]==]".
    return f"[==[{text}]==]"
