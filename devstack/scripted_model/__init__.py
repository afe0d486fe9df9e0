"""A scripted, deterministic OpenAI-compatible model server: the stand-in for vLLM in tests,
the demo and the benchmarks (no GPU here). Every answer says it is scripted.

Run it with ``python -m devstack.scripted_model --port 0`` (it prints ``listening on URL``), or
in-process with `ScriptedModelThread` (sync) or `start_server` / `serve` (async).

Endpoints: ``POST /v1/chat/completions`` and ``POST /v1/completions`` (streamed or not),
``GET /v1/models``, ``GET /health``, ``POST /scripted/config`` (``latency_ms``,
``tokens_per_s``, ``fail_status``, ``fail_after_chunks``, ``hold_until``: calls wait until that
many wait together, see `gate.py`) and ``GET /scripted/stats``. Every
response names the replica in ``X-Scripted-Replica`` (its port).

The script: a user turn with the ``IPythonInterpreter`` tool on offer gets a native tool call
running the turn's fenced Python block, or a program derived from the question; a tool result
gets a final answer quoting it; anything else gets an echo (prefixed with ``[N messages]``,
the messages it was sent besides system ones, when a system prompt says "count the
messages"). With ``WebBrowser`` on offer, "search
the web for X" gets ``WebBrowser.search``, its results ``WebBrowser.open`` of the first one,
and the page an answer quoting it.
"""

from devstack.scripted_model.options import PrefixCacheOptions, ScriptedOptions
from devstack.scripted_model.server import (
    ScriptedModelThread,
    ScriptedServer,
    serve,
    start_server,
)

__all__ = [
    "PrefixCacheOptions",
    "ScriptedModelThread",
    "ScriptedOptions",
    "ScriptedServer",
    "serve",
    "start_server",
]
