"""A fake web for the action tests: a SearxNG-shaped search API and a few pages."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

PAGES = {
    "/docs/redis": (
        "text/html",
        "<html><head><title>Redis</title></head><body>"
        "<script>track()</script><h1>Redis streams</h1><p>XADD appends.</p>"
        "</body></html>",
    ),
    "/docs/celery": ("text/html", "<title>Celery</title><p>Tasks run on workers.</p>"),
    "/notes.txt": ("text/plain", "plain notes"),
    "/logo.png": ("image/png", "\x89PNG"),
    "/long": ("text/plain", "x" * 5000),
}


class SearchHandler(BaseHTTPRequestHandler):
    """SearxNG's JSON shape for /search; a few pages; /broken/* answers 500."""

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        self.server.requests.append(self.path)  # type: ignore[attr-defined]
        if url.path == "/search":
            base = f"http://127.0.0.1:{self.server.server_address[1]}"
            body = _results(parse_qs(url.query), base)
            self._send(200, "application/json", json.dumps(body))
        elif url.path in PAGES:
            self._send(200, *PAGES[url.path])
        else:
            self._send(500 if url.path.startswith("/broken") else 404, "text/plain", "no")

    def _send(self, status: int, kind: str, body: str) -> None:
        data = body.encode("latin-1" if kind == "image/png" else "utf-8")
        self.send_response(status)
        self.send_header("Content-Type", f"{kind}; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output quiet


def _results(query: dict[str, list[str]], base: str) -> dict[str, Any]:
    if query.get("format") != ["json"]:
        return {"error": "format=json missing"}
    q = query["q"][0]
    if q == "nothing":
        return {"results": []}
    topics = ["redis", "celery"] if q == "queues" else [q]
    return {
        "query": q,
        "results": [
            {"url": f"{base}/docs/{t}", "title": f"{t.title()} docs", "content": f"About {t}."}
            for t in topics
        ],
    }


class FakeSearch:
    def __init__(self, server: ThreadingHTTPServer) -> None:
        host, port = server.server_address[:2]
        self.url = f"http://{host}:{port}"
        self.requests: list[str] = server.requests  # type: ignore[attr-defined]
