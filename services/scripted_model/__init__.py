"""A scripted, deterministic OpenAI-compatible model server: the stand-in for vLLM in tests,
the demo and the benchmarks (no GPU here). Every answer says it is scripted."""

from services.scripted_model.options import PrefixCacheOptions, ScriptedOptions
from services.scripted_model.server import (
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
