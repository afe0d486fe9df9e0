"""The proxy's hot path as a raw ASGI app on uvicorn (httptools + uvloop), for `--servers`.

    python bench/_asgi_proxy.py --port N --upstreams URL[,URL]

The same `ProxyApp` (tenants, parsing, routing, forwarding, usage) answers every request;
only the HTTP server differs: uvicorn parses and writes, and a thin adapter hands the proxy a
client connection that turns its answer into ASGI messages. Non-streamed answers only (the
side-by-side phases send none), and no watch for clients that leave, which flatters uvicorn:
a real port would need a second task per request for `http.disconnect`.
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import uvicorn
import uvloop

from services.llm_proxy.app import ProxyApp
from services.llm_proxy.settings import ProxySettings
from taskyard.http1 import Request

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class _AsgiClient:
    """What the proxy writes to: collects one whole answer for the ASGI `send` after it."""

    def __init__(self) -> None:
        self.status = 0
        self.closed = False
        self.answer: tuple[int, list[tuple[bytes, bytes]], bytes] | None = None

    @property
    def response_started(self) -> bool:
        return self.status != 0

    def respond(self, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        self.status = status
        self.answer = (status, headers, body)

    def bind_source(self, cancel: object, transport: object) -> None:
        pass  # no disconnect watch, no flow control: see the module docstring

    def start_stream(self, *args: object) -> None:
        raise NotImplementedError("the ASGI comparison sends no streamed requests")

    def abort(self) -> None:
        self.closed = True


def asgi_app(proxy: ProxyApp) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        headers = dict(scope["headers"])  # uvicorn lower-cases the names
        path, _, query = scope["raw_path"].partition(b"?")
        request = Request(scope["method"].encode(), path, query, headers, b"".join(chunks))
        client = _AsgiClient()
        await proxy.handle(request, client)  # type: ignore[arg-type]  # duck-typed connection
        status, answer_headers, body = client.answer or (500, [], b"")
        answer_headers = [*answer_headers, (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": answer_headers})
        await send({"type": "http.response.body", "body": body})

    return app


async def _main(args: argparse.Namespace) -> None:
    settings = ProxySettings(proxy_upstreams=args.upstreams, proxy_host="127.0.0.1")
    proxy = ProxyApp(settings)
    await proxy.start(port=0)  # its own server idles on a spare port; uvicorn takes the traffic
    config = uvicorn.Config(
        asgi_app(proxy), host="127.0.0.1", port=args.port, http="httptools", loop="uvloop",
        lifespan="off", access_log=False, log_level="warning", backlog=2048,
        server_header=False, date_header=False,
    )  # fmt: skip
    try:
        await uvicorn.Server(config).serve()
    finally:
        await proxy.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstreams", required=True)
    uvloop.run(_main(parser.parse_args()))


if __name__ == "__main__":
    main()
