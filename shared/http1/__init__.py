"""A lean HTTP/1.1 server core, shared by the LLM proxy and the scripted model.

httptools parses on asyncio protocols (uvloop in the services); what both servers need and
nothing more: requests answered in order per connection (pipelined ones wait their turn),
keep-alive, bodies bounded in size, fixed-length and chunked responses, back-pressure from a
slow client onto the source of the answer, a hook that fires when the client leaves, and a
shutdown that drains.

Why not uvicorn (httptools + uvloop) with a raw ASGI app: measured side by side on the same
proxy code, one replica, 2 shared cores (`.venv/bin/python bench/proxy_bench.py --quick
--servers --rounds 3`, 2026-12-01, means of 3 alternating rounds), the proxy on uvicorn added
0.298 ms p50 to a request against 0.219 ms on its own server (1.36x) and 5.2 ms p99 against
1.6 ms, and served 3,575 requests/s at 50 clients against 4,765 (0.75x), before uvicorn even
watches for clients that leave (a second task per request). Both past the 10% allowed, so the
proxy and the scripted model keep a hand-written server, written once, here.
"""

from shared.http1.connection import Connection, Handler
from shared.http1.framing import Headers
from shared.http1.request import Request
from shared.http1.server import HttpServer, listen_socket

__all__ = ["Connection", "Handler", "Headers", "HttpServer", "Request", "listen_socket"]
