"""Fakes for the action tests: an in-process sandbox provider and a SearxNG-shaped server."""

from __future__ import annotations

import ast
import contextlib
import io
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from shared.sandbox import ExecutionResult


class InProcessSandbox:
    """A stand-in for one session's kernel: exec in a namespace that lives as long as it."""

    def __init__(self) -> None:
        self.namespace: dict[str, Any] = {}
        self.calls: list[tuple[str, float]] = []

    def run(self, code: str, timeout: float) -> ExecutionResult:
        self.calls.append((code, timeout))
        tree = ast.parse(code)
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                exec(compile(tree, "<cell>", "exec"), self.namespace)
                value = (
                    eval(compile(ast.Expression(last.value), "<cell>", "eval"), self.namespace)
                    if last
                    else None
                )
        except Exception as exc:
            return ExecutionResult(stdout=out.getvalue(), error=f"{type(exc).__name__}: {exc}")
        return ExecutionResult(stdout=out.getvalue(), result=None if value is None else repr(value))

    def close(self) -> None:
        self.namespace.clear()


class InProcessProvider:
    """A `SandboxProvider` over `InProcessSandbox`es, one per session key (tests only)."""

    def __init__(self) -> None:
        self.sandboxes: dict[str, InProcessSandbox] = {}

    def get(self, session_key: str) -> InProcessSandbox:
        return self.sandboxes.setdefault(session_key, InProcessSandbox())

    def release(self, session_key: str) -> None:
        self.sandboxes.pop(session_key, InProcessSandbox()).close()

    def close_all(self) -> None:
        for key in list(self.sandboxes):
            self.release(key)


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
