"""The lean HTTP layer over raw sockets: pipelining, keep-alive, clients that go away."""

from __future__ import annotations

import json
import socket

import httpx
import pytest

from devstack.scripted_model import ScriptedModelThread


def _request(path: str, body: dict[str, object] | None = None) -> bytes:
    data = json.dumps(body).encode() if body is not None else b""
    method = "POST" if body is not None else "GET"
    head = f"{method} {path} HTTP/1.1\r\nhost: x\r\ncontent-length: {len(data)}\r\n\r\n"
    return head.encode() + data


def _read_until(sock: socket.socket, marker: bytes, count: int) -> bytes:
    received = b""
    while received.count(marker) < count:
        chunk = sock.recv(65536)
        if not chunk:
            break
        received += chunk
    return received


def test_pipelined_requests_are_answered_in_order(model: ScriptedModelThread) -> None:
    control = httpx.post(f"http://127.0.0.1:{model.port}/scripted/config", json={"latency_ms": 5})
    assert control.status_code == 200
    chat = {"model": "m", "messages": [{"role": "user", "content": "first"}]}
    with socket.create_connection(("127.0.0.1", model.port), timeout=10) as sock:
        sock.sendall(_request("/v1/chat/completions", chat) + _request("/health"))
        received = _read_until(sock, b"HTTP/1.1 200 OK", 2)
    first, second = received.split(b"HTTP/1.1 200 OK")[1:]
    assert b"You said: first" in first
    assert b'"status":"ok"' in second


def test_a_client_leaving_mid_request_does_not_hurt_the_server(
    model: ScriptedModelThread, control: httpx.Client
) -> None:
    control.post("/scripted/config", json={"latency_ms": 50})
    chat = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    with socket.create_connection(("127.0.0.1", model.port), timeout=10) as sock:
        sock.sendall(_request("/v1/chat/completions", chat))
    assert control.get("/health").status_code == 200


def test_malformed_http_gets_400_and_a_closed_connection(model: ScriptedModelThread) -> None:
    with socket.create_connection(("127.0.0.1", model.port), timeout=10) as sock:
        sock.sendall(b"NOT HTTP AT ALL\r\n\r\n")
        received = _read_until(sock, b"\r\n\r\n", 1)
        assert received.startswith(b"HTTP/1.1 400")
        assert sock.recv(1) == b""


def test_malformed_chat_bodies_get_400(control: httpx.Client) -> None:
    for body in (
        {"messages": ["not an object"]},
        {"messages": [{"role": "user", "content": "x"}], "tools": "IPythonInterpreter"},
        {"messages": [{"role": "user", "content": "x"}], "stream": True, "stream_options": 1},
    ):
        answer = control.post("/v1/chat/completions", json=body)
        assert answer.status_code == 400, body
        assert answer.json()["error"]["type"] == "invalid_request_error"


def test_thread_helper_stops_cleanly_once_or_twice_or_unstarted() -> None:
    never_started = ScriptedModelThread()
    never_started.stop()
    with ScriptedModelThread() as model:
        port = model.port
        assert httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200
    model.stop()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/health")


def test_thread_helper_reports_a_start_failure(model: ScriptedModelThread) -> None:
    taken = ScriptedModelThread(port=model.port)
    with pytest.raises(OSError):
        taken.start()
