"""The Python client reads server-sent events per the specification (multi-line data, `data:`
without a space, comments, events it does not know), resumes a dropped stream with
`Last-Event-ID`, and has an async twin that reads the same."""

from __future__ import annotations

import inspect
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from taskyard.client import AsyncTaskyardClient, NotFound, TaskyardClient
from taskyard.client.core import ClientCore
from taskyard.runtime.events import EventKind

# The first connection: a comment, a status, a keep-alive after it (httpx-sse turns that one
# into an event with the last id and no data, which the specification does not dispatch), a
# message whose JSON spans two data lines, one written without the space, an event of a kind
# this client does not know; then it drops.
FIRST = (
    b": keep-alive\n\n"
    b'id: 1-0\nevent: status\ndata: {"status": "running"}\n\n'
    b": keep-alive\n\n"
    b'id: 2-0\nevent: message\ndata: {"sender": "assistant",\ndata:"content": "two\\nlines"}\n\n'
    b'id: 3-0\nevent: from_a_newer_server\ndata: {"call_id": "c1"}\n\n'
)
# After a reconnect with Last-Event-ID 3-0: the final status, with CRLF line ends.
RESUMED = b'id: 4-0\r\nevent: status\r\ndata: {"status": "succeeded"}\r\n\r\n'


class _Server:
    def __init__(self) -> None:
        self.last_event_ids: list[str | None] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                if not self.path.startswith("/v1/tasks/t1/"):
                    body = b'{"detail": "no such task"}'
                    self.send_response(404)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                last = self.headers.get("Last-Event-ID")
                server.last_event_ids.append(last)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(RESUMED if last == "3-0" else FIRST)
                self.close_connection = True

            def log_message(self, *args: object) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_port}"


@pytest.fixture
def server() -> Iterator[_Server]:
    server = _Server()
    threading.Thread(target=server.http.serve_forever, daemon=True).start()
    yield server
    server.http.shutdown()
    server.http.server_close()


def _check(events: list, server: _Server) -> None:
    assert [(e.id, e.kind) for e in events] == [
        ("1-0", EventKind.STATUS),
        ("2-0", EventKind.MESSAGE),
        ("4-0", EventKind.STATUS),
    ]
    assert events[1].data == {"sender": "assistant", "content": "two\nlines"}
    assert events[-1].is_final
    assert server.last_event_ids == [None, "3-0"]  # resumed after the last event seen


def test_sync_client_reads_per_the_specification(server: _Server) -> None:
    with TaskyardClient(server.url, "key") as client:
        _check(list(client.events("t1")), server)
        with pytest.raises(NotFound, match="no such task"):
            list(client.events("t2"))


async def test_async_twin_reads_the_same(server: _Server) -> None:
    async with AsyncTaskyardClient(server.url, "key") as client:
        _check([event async for event in client.events("t1")], server)
        with pytest.raises(NotFound, match="no such task"):
            await client.get("t2")


async def test_the_sync_client_blocks_inside_a_running_event_loop_too(server: _Server) -> None:
    # Its coroutines never suspend, so it needs no loop and leaves the running one alone.
    with TaskyardClient(server.url, "key") as client:
        _check(list(client.events("t1")), server)


def test_the_sync_client_has_every_method_of_the_core_with_its_signature() -> None:
    public = [name for name in vars(ClientCore) if not name.startswith("_")]
    assert public and [n for n in public if not hasattr(TaskyardClient, n)] == []
    for name in public:
        core, blocking = getattr(ClientCore, name), getattr(TaskyardClient, name)
        assert inspect.signature(blocking) == inspect.signature(core), name
        assert blocking.__doc__ == core.__doc__, name
