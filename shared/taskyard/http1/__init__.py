"""A lean HTTP/1.1 server core, shared by the LLM proxy and the scripted model.

httptools parses on asyncio protocols (uvloop in the services); what both servers need and
nothing more: requests answered in order per connection (pipelined ones wait their turn),
keep-alive, bodies bounded in size, fixed-length and chunked responses, back-pressure from a
slow client onto the source of the answer, a hook that fires when the client leaves, and a
shutdown that drains.

Why not uvicorn (httptools + uvloop) with a raw ASGI app: measured side by side on the same
proxy code, one replica, 2 cores shared with other work (`.venv/bin/python bench/proxy_bench.py
--quick --servers --rounds 3`, 2026-12-01, means of 3 alternating rounds, two runs), the proxy
on uvicorn added 1.36x and 1.26x the p50 latency of its own server (0.298 vs 0.219 ms, 0.286
vs 0.227 ms) and served 0.75x and 0.76x the requests/s at 50 clients (3,575 vs 4,765; 3,458 vs
4,552); p99 was noise either way (3.2x, 0.56x). That is before uvicorn even watches for clients
that leave (a second task per request). Past the 10% allowed on both, so the proxy and the
scripted model keep a hand-written server, written once, here.
"""

from taskyard.http1.connection import Connection, Handler
from taskyard.http1.framing import Headers
from taskyard.http1.request import Request
from taskyard.http1.server import HttpServer, listen_socket

__all__ = ["Connection", "Handler", "Headers", "HttpServer", "Request", "listen_socket"]
