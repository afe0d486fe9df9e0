"""A fake web on loopback for the browser tests: a SearxNG-shaped search API and pages, served
over real HTTP by a thread of the test process. Every request is recorded."""

from __future__ import annotations

import contextlib
import functools
import gzip
import json
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

REDIS_ARTICLE = """<!doctype html><html><head><meta charset="utf-8">
<title>Redis Streams explained - Example Docs</title>
<style>body {color: red}</style><script>var tracking = 1;</script></head>
<body><header><nav><ul><li><a href="/">Home</a></li><li><a href="/blog">Blog</a></li>
<li><a href="/about">About us</a></li></ul></nav></header>
<div class="cookie-banner">We use cookies to improve your experience. Accept all cookies.</div>
<main><article><h1>Redis Streams explained</h1>
<p>Redis Streams are an append-only log: XADD appends an entry and returns its ID, made of a
millisecond timestamp and a sequence number.</p>
<p>Consumer groups let several workers share one stream, each entry going to one consumer of
the group, which acknowledges it with XACK once it is done.</p>
</article></main>
<aside><h3>Related posts</h3><ul><li><a href="/a">Ten tips for caching</a></li></ul></aside>
<footer><p>Copyright 2026 Example Corp. All rights reserved.</p></footer></body></html>"""

PAGES: dict[str, tuple[str, bytes]] = {
    "/docs/redis": ("text/html; charset=utf-8", REDIS_ARTICLE.encode()),
    "/docs/celery": ("text/html", b"<title>Celery</title><p>Tasks run on workers.</p>"),
    "/notes.txt": ("text/plain; charset=utf-8", b"plain notes"),
    "/cafe.txt": ("text/plain; charset=iso-8859-1", "un caf\xe9 cr\xe8me".encode("latin-1")),
    "/logo.png": ("image/png", b"\x89PNG\r\n"),
    "/long": ("text/plain", b"x" * 5000),
}
_CHUNK = b"<p>" + b"endless text " * 5000 + b"</p>\n"  # about 64 KiB
_ENDLESS_LIMIT = 256 * 1024 * 1024  # a runaway client still stops the server here
_TRICKLE_BYTES = 100  # one every 0.1 s: ten seconds at most


@functools.cache
def _gzip_bomb() -> bytes:
    """32 MiB of HTML that compresses to a few dozen KiB."""
    return gzip.compress(b"<html><body><p>" + b"boom " * (32 * 1024 * 1024 // 5), compresslevel=9)


@dataclass
class Request:
    path: str
    host: str


@dataclass
class FakeWeb:
    """The server's address and what it was asked; `searx_json` false answers /search with
    403, as SearxNG does while ``json`` is not in its ``search.formats``."""

    url: str
    requests: list[Request] = field(default_factory=list)
    searx_json: bool = True
    bytes_sent: int = 0

    def paths(self) -> list[str]:
        return [r.path for r in self.requests]


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        web = self.server.web
        web.requests.append(Request(self.path, self.headers.get("Host", "")))
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        routes = {
            "/search": lambda: self._search(query),
            "/redirect": lambda: self._redirect(query["to"][0]),
            "/loop": lambda: self._redirect("/loop"),
            "/endless": self._endless,
            "/slow": self._slow,
            "/bomb": lambda: self._send(200, "text/html", _gzip_bomb(), encoding="gzip"),
        }
        if url.path in routes:
            routes[url.path]()
        elif url.path in PAGES:
            self._send(200, *PAGES[url.path])
        else:
            self._send(500 if url.path.startswith("/broken") else 404, "text/plain", b"no")

    def _search(self, query: dict[str, list[str]]) -> None:
        if not self.server.web.searx_json or query.get("format") != ["json"]:
            self._send(403, "text/html", b"<h1>403 Forbidden</h1>")
            return
        if query["q"] == ["malformed"]:
            self._send(200, "application/json", b'{"results": "not a list"}')
            return
        body = _search_answer(query["q"][0], self.server.web.url)
        self._send(200, "application/json", json.dumps(body).encode())

    def _redirect(self, to: str) -> None:
        self.send_response(302)
        self.send_header("Location", to)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _endless(self) -> None:
        self._start_unsized("text/html")
        with contextlib.suppress(OSError):  # the client hung up: what the test wants
            while self.server.web.bytes_sent < _ENDLESS_LIMIT:
                self.wfile.write(_CHUNK)
                self.server.web.bytes_sent += len(_CHUNK)

    def _slow(self) -> None:
        self._start_unsized("text/plain")
        with contextlib.suppress(OSError):
            for _ in range(_TRICKLE_BYTES):
                self.wfile.write(b"x")
                self.wfile.flush()
                time.sleep(0.1)

    def _start_unsized(self, kind: str) -> None:
        # HTTP/1.0 without Content-Length: the body lasts until the server closes.
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.end_headers()

    def _send(self, status: int, kind: str, body: bytes, encoding: str | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        if encoding:
            self.send_header("Content-Encoding", encoding)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        with contextlib.suppress(OSError):
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output quiet


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    web: FakeWeb


def _search_answer(q: str, base: str) -> dict[str, Any]:
    if q == "nothing":
        return {"query": q, "results": []}
    if q == "engines down":
        return {"query": q, "results": [], "unresponsive_engines": [["google", "timeout"]]}
    topics = ["redis", "celery"] if q in ("queues", "redis streams") else [q]
    results = [
        {"url": f"{base}/docs/{t}", "title": f"{t.title()} docs", "content": f"About {t}.",
         "engine": "duckduckgo", "score": 1.0}
        for t in topics
    ]  # fmt: skip
    return {"query": q, "number_of_results": len(results), "results": results, "answers": []}


@contextlib.contextmanager
def serve_fake_web(
    host: str = "127.0.0.1", port: int = 0, tls: ssl.SSLContext | None = None
) -> Iterator[FakeWeb]:
    """The fake web on `host` (a loopback address) and `port` (a free one by default), over
    HTTPS with `tls`, until the block ends."""
    server = _Server((host, port), _Handler)
    scheme = "http"
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
        scheme = "https"
    server.web = FakeWeb(f"{scheme}://{host}:{server.server_address[1]}")
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield server.web
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
