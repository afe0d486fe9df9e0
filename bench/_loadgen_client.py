"""POST load against the gateway from another process: wrk where installed (C, cheap on
CPU), else `_loadgen.py`. Either way one summary shape."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from _wrk import wrk_available, wrk_load

from devstack.stack import LocalStack

__all__ = ["post_load"]

_LOADGEN = Path(__file__).resolve().parent / "_loadgen.py"


def post_load(stack: LocalStack, body: str, connections: int, seconds: float) -> dict[str, Any]:
    """POST `body` to /v1/tasks from `connections` clients for `seconds`."""
    request = {"path": "/v1/tasks", "body": body,
               "headers": {"authorization": f"Bearer {stack.api_key}"}}  # fmt: skip
    if wrk_available():
        wrk_load(stack.gateway_url, request, connections, 1)  # warm-up
        result = wrk_load(stack.gateway_url, request, connections, seconds)
        tool = "wrk"
    else:
        spec = {"host": "127.0.0.1", "port": stack.ports.gateway, "concurrency": connections,
                "requests": [{**request, "headers": {**request["headers"],
                                                     "content-type": "application/json"}}],
                "duration_s": seconds, "warmup_s": 1.0}  # fmt: skip
        argv = [sys.executable, str(_LOADGEN)]
        ran = subprocess.run(argv, input=json.dumps(spec), capture_output=True, text=True,
                             check=True, timeout=seconds + 60)  # fmt: skip
        result, tool = json.loads(ran.stdout), "Python load generator"
    return {"rps": result["rps"], "p50_ms": result["latency_ms"].get("p50", 0.0),
            "errors": result["errors"], "tool": tool}  # fmt: skip
