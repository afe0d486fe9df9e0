"""The engine proxy: the Docker engine as tool workers may use it, and nothing more.

Tool workers reach the engine only through it (their `DOCKER_HOST`); it reads every request,
method, path, query and JSON body, and lets a worker make sandbox containers, locked down as
the sandbox makes them and labelled as that worker's, and act on its own containers alone
(docs/security.md). Start it with `python -m services.engine_proxy` (see `--help`), or in
process with `EngineProxy`.

- `routes`: what a request asks for; `gate`: whether it passes, route by route;
- `create`, `execs`: the create and exec rules; `ownership`: whose a container is, and the
  hand-off rule; `holdings`: ownership as the engine records it, kept a while;
- `callers`: who is calling; `wire`, `engine`, `relay`: HTTP on both sides, the engine's
  socket, a worker's connection; `proxy`: the server; `reaper`: hand-offs that ended, removed.
"""

from services.engine_proxy.callers import TOKEN_HEADER
from services.engine_proxy.ownership import CALLER_LABEL
from services.engine_proxy.proxy import EngineProxy
from services.engine_proxy.settings import EngineProxySettings, get_engine_proxy_settings

__all__ = [
    "CALLER_LABEL",
    "TOKEN_HEADER",
    "EngineProxy",
    "EngineProxySettings",
    "get_engine_proxy_settings",
]
