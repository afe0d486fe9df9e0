"""The shared HTTP/1.1 core over real sockets: order, limits, clients that leave, failures,
draining; and the one OpenAI error body."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import orjson
import pytest

from taskyard.http1 import Connection, Handler, HttpServer, Request, listen_socket
from taskyard.http1.openai_errors import error_body, error_event

Serve = Callable[[Handler, int], Awaitable[int]]
TEXT = [(b"content-type", b"text/plain")]


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    """A factory: serve a handler on a free loopback port; every server is closed after."""
    servers: list[HttpServer] = []

    async def start(handler: Handler, max_body: int = 1024) -> int:
        server = HttpServer(handler, max_body)
        servers.append(server)
        return await server.start(listen_socket("127.0.0.1", 0))

    yield start
    for server in servers:
        await server.close()


def _get(path: str, body: bytes = b"", close: bool = False) -> bytes:
    extra = b"connection: close\r\n" if close else b""
    head = b"POST %s HTTP/1.1\r\nhost: x\r\n%scontent-length: %d\r\n\r\n"
    return head % (path.encode(), extra, len(body)) + body


async def _exchange(port: int, data: bytes) -> bytes:
    """Send `data`, read until the server closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    received = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    return received


async def test_pipelined_requests_are_answered_in_order_whether_at_once_or_later(
    serve: Serve,
) -> None:
    def handler(request: Request, conn: Connection) -> Awaitable[None] | None:
        if request.path == b"/slow":
            return _later(conn)
        conn.respond(200, TEXT, b"fast " + request.query)
        return None

    async def _later(conn: Connection) -> None:
        await asyncio.sleep(0.05)
        conn.respond(200, TEXT, b"slow")

    port = await serve(handler, 1024)
    received = await _exchange(port, _get("/fast?1") + _get("/slow") + _get("/fast?2", close=True))
    bodies = [part.rsplit(b"\r\n\r\n", 1)[-1] for part in received.split(b"HTTP/1.1 200 OK")[1:]]
    assert bodies == [b"fast 1", b"slow", b"fast 2"]


async def test_a_body_past_the_limit_is_dropped_and_the_connection_still_serves(
    serve: Serve,
) -> None:
    def handler(request: Request, conn: Connection) -> None:
        status = 413 if request.body_too_large else 200
        conn.respond(status, TEXT, b"%d" % len(request.body))

    port = await serve(handler, 10)
    received = await _exchange(port, _get("/", b"x" * 50) + _get("/", b"y" * 5, close=True))
    assert received.startswith(b"HTTP/1.1 413 Request Entity Too Large")
    assert received.endswith(b"\r\n\r\n5")


async def test_a_client_leaving_runs_the_bound_cancel_hook(serve: Serve) -> None:
    cancelled = asyncio.Event()

    async def handler(request: Request, conn: Connection) -> None:
        conn.bind_source(cancelled.set, None)
        conn.start_stream(200, TEXT, b"first")
        await asyncio.wait_for(cancelled.wait(), 5)
        assert conn.closed

    port = await serve(handler, 1024)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(_get("/"))
    assert b"first" in await reader.readuntil(b"first")
    writer.close()
    await asyncio.wait_for(cancelled.wait(), 5)


async def test_a_failing_handler_answers_an_openai_500_and_closes(serve: Serve) -> None:
    async def handler(request: Request, conn: Connection) -> None:
        raise RuntimeError("boom")

    port = await serve(handler, 1024)
    received = await _exchange(port, _get("/") + _get("/never"))
    assert received.count(b"HTTP/1.1") == 1
    assert received.startswith(b"HTTP/1.1 500")
    error = orjson.loads(received.rsplit(b"\r\n\r\n", 1)[-1])["error"]
    assert error["type"] == "server_error"


async def test_malformed_http_gets_400_then_a_closed_connection(serve: Serve) -> None:
    port = await serve(lambda request, conn: None, 1024)
    received = await _exchange(port, b"NOT HTTP AT ALL\r\n\r\n")
    assert received.startswith(b"HTTP/1.1 400")
    assert orjson.loads(received.rsplit(b"\r\n\r\n", 1)[-1])["error"]["code"] == "bad_request"


async def test_closing_lets_an_exchange_in_progress_finish_within_the_drain() -> None:
    async def handler(request: Request, conn: Connection) -> None:
        await asyncio.sleep(0.2)
        conn.respond(200, TEXT, b"done")

    server = HttpServer(handler, 1024)
    port = await server.start(listen_socket("127.0.0.1", 0))
    answer = asyncio.create_task(_exchange(port, _get("/")))
    await asyncio.sleep(0.05)
    await server.close(drain_s=5)
    received = await answer
    assert received.startswith(b"HTTP/1.1 200") and received.endswith(b"done")
    assert b"connection: close" in received


async def test_closing_cancels_and_awaits_an_exchange_whose_client_left() -> None:
    """A handler that binds no cancel hook runs on after its client leaves; the server's
    close still cancels it and waits for it, so no task outlives the server's loop."""
    started, unwound = asyncio.Event(), asyncio.Event()

    async def handler(request: Request, conn: Connection) -> None:
        started.set()
        try:
            await asyncio.sleep(30)
        finally:
            unwound.set()

    server = HttpServer(handler, 1024)
    port = await server.start(listen_socket("127.0.0.1", 0))
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(_get("/"))
    await asyncio.wait_for(started.wait(), 5)
    writer.close()
    await asyncio.sleep(0.1)  # the server sees the connection lost
    await asyncio.wait_for(server.close(), 5)
    assert unwound.is_set()


def test_the_openai_error_body_and_event_have_the_sdk_shape() -> None:
    body = orjson.loads(error_body("no such model", "invalid_request_error", "model_not_found"))
    assert body == {
        "error": {
            "message": "no such model",
            "type": "invalid_request_error",
            "param": None,
            "code": "model_not_found",
        }
    }
    event = error_event("cut", "upstream_error", "stream_interrupted")
    assert event.startswith(b"data: ") and event.endswith(b"\n\n")
    assert orjson.loads(event[6:])["error"]["code"] == "stream_interrupted"
