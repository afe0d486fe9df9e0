"""A lean HTTP/1.1 keep-alive load generator, run as its own process by `proxy_bench.py`.

It reads a JSON spec on stdin and prints one JSON result on stdout, so the client runs on its
own interpreter and is not the bottleneck of what it measures. Spec keys:

- ``host``, ``port``; ``concurrency`` connections, each sending one request at a time;
- ``requests``: a list of ``{"path", "body", "headers"}`` sent round and round, or ``lanes``:
  lists of such requests, each lane sent in order on one connection (a multi-turn session),
  to ``port`` or, when given, to the lane's own port in ``lane_ports``, or each turn to its
  own port, ``turn_ports[lane][turn]`` (a session's turns spread over proxy instances);
  ``think_ms`` passes between a lane's turns (an agent's tool call before its next model call);
- ``max_requests`` and ``duration_s`` bound the measured part; ``warmup_s`` runs first, unmeasured.

The result gives requests/s, latency and time-to-first-body-byte percentiles in milliseconds,
status counts, the sum of any ``x-prefix-cached-tokens`` response headers and, for lanes, the
share of a lane's requests its most used ``x-scripted-replica`` served (session locality).
"""

from __future__ import annotations

import asyncio
import functools
import json
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httptools
import uvloop

_CACHED_HEADER = b"x-prefix-cached-tokens"
_REPLICA_HEADER = b"x-scripted-replica"


@dataclass(slots=True)
class _Sample:
    latency_ns: int
    first_byte_ns: int
    status: int
    cached_tokens: int
    replica: bytes
    lane: int


@dataclass(slots=True)
class _Run:
    """Shared state of one load run: the bounds and what was measured."""

    measure_from: float
    stop_at: float
    max_requests: int
    samples: list[_Sample] = field(default_factory=list)
    errors: int = 0
    started: int = 0

    def may_start(self) -> bool:
        return time.perf_counter() < self.stop_at and self.started < self.max_requests

    def measuring(self) -> bool:
        return time.perf_counter() >= self.measure_from


class _Connection(asyncio.Protocol):
    """One keep-alive client connection: send a request, await its whole response."""

    def __init__(self) -> None:
        self._parser = httptools.HttpResponseParser(self)
        self._transport: asyncio.Transport | None = None
        self._done: asyncio.Future[None] | None = None
        self.first_byte_ns = 0
        self.cached_tokens = 0
        self.replica = b""
        self.status = 0
        self.keep_alive = True

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as error:
            self._fail(error)

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        self._fail(exc or ConnectionError("connection closed"))

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name == _CACHED_HEADER:
            self.cached_tokens = int(value)
        elif name == _REPLICA_HEADER:
            self.replica = value

    def on_headers_complete(self) -> None:
        self.status = self._parser.get_status_code()
        self.keep_alive = self._parser.should_keep_alive()

    def on_body(self, body: bytes) -> None:
        if not self.first_byte_ns:
            self.first_byte_ns = time.perf_counter_ns()

    def on_message_complete(self) -> None:
        if self._done is not None and not self._done.done():
            self._done.set_result(None)

    @property
    def open(self) -> bool:
        return self._transport is not None and self.keep_alive

    async def exchange(self, data: bytes) -> None:
        """Send one request and wait for the end of its response."""
        if self._transport is None:
            raise ConnectionError("not connected")
        self.first_byte_ns, self.cached_tokens, self.status, self.replica = 0, 0, 0, b""
        self._done = asyncio.get_running_loop().create_future()
        self._transport.write(data)
        await self._done

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    def _fail(self, error: BaseException) -> None:
        if self._done is not None and not self._done.done():
            self._done.set_exception(error)


def _encode(host: str, port: int, request: dict[str, Any]) -> bytes:
    body = request["body"].encode() if isinstance(request["body"], str) else b""
    lines = [f"POST {request['path']} HTTP/1.1", f"host: {host}:{port}"]
    lines += [f"{name}: {value}" for name, value in request.get("headers", {}).items()]
    lines += ["content-type: application/json", f"content-length: {len(body)}", "", ""]
    return "\r\n".join(lines).encode() + body


async def _connect(host: str, port: int) -> _Connection:
    loop = asyncio.get_running_loop()
    _, connection = await loop.create_connection(_Connection, host, port)
    return connection


async def _send(
    run: _Run, host: str, port: int, conn: _Connection | None, data: bytes, lane: int = -1
) -> _Connection | None:
    """One request on `conn` (reconnecting if needed); returns the connection to reuse."""
    run.started += 1
    start = time.perf_counter_ns()
    try:
        if conn is None or not conn.open:
            conn = await _connect(host, port)
        await conn.exchange(data)
    except (OSError, httptools.HttpParserError):
        run.errors += 1
        return None
    end = time.perf_counter_ns()
    if run.measuring():
        first = (conn.first_byte_ns or end) - start
        sample = _Sample(end - start, first, conn.status, conn.cached_tokens, conn.replica, lane)
        run.samples.append(sample)
    return conn


async def _cycle_worker(
    run: _Run, spec: dict[str, Any], payloads: list[bytes], offset: int
) -> None:
    conn: _Connection | None = None
    index = offset
    while run.may_start():
        conn = await _send(run, spec["host"], spec["port"], conn, payloads[index % len(payloads)])
        index += 1
    if conn is not None:
        conn.close()


async def _lane_worker(
    run: _Run, spec: dict[str, Any], lanes: asyncio.Queue[tuple[int, list[bytes]]]
) -> None:
    think_s = float(spec.get("think_ms", 0)) / 1000
    while run.may_start() and not lanes.empty():
        conns: dict[int, _Connection | None] = {}
        lane, requests = lanes.get_nowait()
        for turn, data in enumerate(requests):
            if not run.may_start():
                break
            if turn and think_s:
                await asyncio.sleep(think_s)
            port = _turn_port(spec, lane, turn)
            conns[port] = await _send(run, spec["host"], port, conns.get(port), data, lane)
        for conn in conns.values():
            if conn is not None:
                conn.close()


def _turn_port(spec: dict[str, Any], lane: int, turn: int) -> int:
    if "turn_ports" in spec:
        return int(spec["turn_ports"][lane][turn])
    return int(spec["lane_ports"][lane]) if "lane_ports" in spec else int(spec["port"])


def _percentiles(values_ns: list[int]) -> dict[str, float]:
    if not values_ns:
        return {}
    ordered = sorted(values_ns)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] / 1e6

    mean = sum(ordered) / len(ordered) / 1e6
    return {"p50": at(0.50), "p90": at(0.90), "p99": at(0.99), "mean": mean}


async def run_load(spec: dict[str, Any]) -> dict[str, Any]:
    """Run the spec'd load and summarise it."""
    begin = time.perf_counter()
    warmup = float(spec.get("warmup_s", 0.0))
    run = _Run(
        measure_from=begin + warmup,
        stop_at=begin + warmup + float(spec.get("duration_s", 10.0)),
        max_requests=int(spec.get("max_requests", 10**9)),
    )
    encode = functools.partial(_encode, spec["host"], spec["port"])
    if "lanes" in spec:
        queue: asyncio.Queue[tuple[int, list[bytes]]] = asyncio.Queue()
        for index, lane in enumerate(spec["lanes"]):
            queue.put_nowait((index, [encode(request) for request in lane]))
        workers = [_lane_worker(run, spec, queue) for _ in range(spec["concurrency"])]
    else:
        payloads = [encode(request) for request in spec["requests"]]
        workers = [_cycle_worker(run, spec, payloads, i) for i in range(spec["concurrency"])]
    await asyncio.gather(*workers)
    elapsed = time.perf_counter() - max(run.measure_from, begin)
    return _summary(run, elapsed)


def _summary(run: _Run, elapsed: float) -> dict[str, Any]:
    ok = [s for s in run.samples if 200 <= s.status < 300]
    return {
        "requests": len(run.samples),
        "ok": len(ok),
        "errors": run.errors + len(run.samples) - len(ok),
        "statuses": dict(Counter(s.status for s in run.samples)),
        "elapsed_s": elapsed,
        "rps": len(ok) / elapsed if elapsed > 0 else 0.0,
        "latency_ms": _percentiles([s.latency_ns for s in ok]),
        "first_byte_ms": _percentiles([s.first_byte_ns for s in ok]),
        "cached_tokens": sum(s.cached_tokens for s in ok),
        "lane_locality": _lane_locality(ok),
    }


def _lane_locality(samples: list[_Sample]) -> float | None:
    by_lane: dict[int, Counter[bytes]] = {}
    for sample in samples:
        if sample.lane >= 0:
            by_lane.setdefault(sample.lane, Counter())[sample.replica] += 1
    if not by_lane:
        return None
    modal = sum(counts.most_common(1)[0][1] for counts in by_lane.values())
    return modal / sum(sum(counts.values()) for counts in by_lane.values())


def main() -> None:
    """Read the spec from stdin, run it, print the result as JSON."""
    spec = json.load(sys.stdin)
    print(json.dumps(uvloop.run(run_load(spec))))


if __name__ == "__main__":
    main()
