"""Forwarding one completion request: route, send, retry before the first byte, fall back.

The attempt loop: pick a replica (waiting in the group's queue if every replica is at its
bound), run one exchange, and depending on the outcome answer the client, try another replica
(connection errors, timeouts, 429/502/503/504, all before any byte reached the client), or move
on to the fallback model group (every replica down, or the context was too long).
"""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass

import orjson
from opentelemetry.trace import Span

from services.llm_proxy.accounting.metrics import Metrics
from services.llm_proxy.accounting.usage import tokens_of, usage_header
from services.llm_proxy.errors import (
    ModelNotFound,
    NoReplica,
    UpstreamError,
    UpstreamFailed,
    UpstreamTimeout,
)
from services.llm_proxy.http.payload import ParsedRequest, with_model
from services.llm_proxy.http.streaming import StreamRelay
from services.llm_proxy.http.tracing import upstream_span
from services.llm_proxy.limits.admission import WaitQueue
from services.llm_proxy.limits.ratelimit import RateLimiter
from services.llm_proxy.limits.tenants import Tenant
from services.llm_proxy.replicas.health import HealthPolicy
from services.llm_proxy.replicas.pool import Group, Pool, Replica
from services.llm_proxy.replicas.upstream import UpstreamConnection
from services.llm_proxy.routing.policies import RoutingPolicy
from taskyard.http1 import Connection

__all__ = ["Forwarder", "Job"]

_RETRY_STATUSES = frozenset({429, 502, 503, 504})
# A slow answer may be a long generation; a refused or dropped connection is a dead replica.
_SOFT_ERRORS = (UpstreamTimeout,)
_CONTEXT_MARKERS = (b"context length", b"context_length", b"maximum context")
# Upstream headers that describe the hop, not the answer.
_HOP_HEADERS = frozenset(
    {b"connection", b"keep-alive", b"transfer-encoding", b"content-length", b"date", b"server"}
)


class Outcome(enum.Enum):
    ANSWERED = "answered"  # the client got its response (or left)
    RETRY = "retry"  # nothing reached the client; another replica may try
    FALLBACK = "fallback"  # the context was too long for this model


@dataclass(slots=True)
class Job:
    """One request on its way through the proxy."""

    client: Connection
    path: bytes  # the upstream path after the replica's base path, e.g. b"/chat/completions"
    request: ParsedRequest
    tenant: Tenant
    task_id: str | None  # its token's task, else what X-Task-ID said (logs and traces only)
    session_id: bytes | None
    attempts_left: int = 0
    failures: int = 0
    # The last retryable answer (429, 502, 503, 504), shown if no replica does better.
    last_refusal: tuple[int, list[tuple[bytes, bytes]], bytes] | None = None
    span: Span | None = None  # the request's, when tracing is on
    trace_header: bytes = b""  # the current attempt's `traceparent` line, when tracing is on


class Forwarder:
    """Runs the attempt loop for completion requests against the pool."""

    def __init__(
        self,
        pool: Pool,
        policy: RoutingPolicy,
        health: HealthPolicy,
        queues: dict[str, WaitQueue],
        limiter: RateLimiter,
        metrics: Metrics,
        max_retries: int,
    ) -> None:
        self._pool = pool
        self._policy = policy
        self._health = health
        self._queues = queues
        self._limiter = limiter
        self._metrics = metrics
        self._max_retries = max_retries
        self._loop = asyncio.get_running_loop()

    async def forward(self, job: Job) -> None:
        """Answer `job`'s client from some replica, or raise the `ProxyError` to show it."""
        models = [job.request.model, *self._pool.fallbacks.get(job.request.model, ())]
        groups = [(m, g) for m in models if (g := self._pool.group(m)) is not None]
        if not groups:
            raise ModelNotFound(f"no replica serves the model {job.request.model!r}")
        job.attempts_left = self._max_retries + 1
        for index, (model, group) in enumerate(groups):
            if await self._try_group(job, model, group, last_group=index == len(groups) - 1):
                return
        if job.last_refusal is not None:
            job.client.respond(*job.last_refusal)
        elif job.failures and any(r.healthy for _, g in groups for r in g.replicas):
            raise UpstreamFailed("the replicas failed to answer after retries", retry_after=1)
        else:
            raise NoReplica(
                f"no healthy replica for the model {job.request.model!r}", retry_after=1
            )

    async def _try_group(self, job: Job, model: str, group: Group, last_group: bool) -> bool:
        """Attempts on one model group while the budget lasts; True once the client is done."""
        request = job.request
        body = request.body if model == request.model else with_model(request, model)
        tried: set[Replica] = set()
        while job.attempts_left > 0:
            replica = await self._pick(group, request.route_key, tried)
            if replica is None:
                return False
            if job.client.closed:
                return True  # left while waiting for a replica
            job.attempts_left -= 1
            outcome = await self._attempt(job, group, replica, body, last_group)
            if outcome is not Outcome.RETRY:
                return outcome is Outcome.ANSWERED
            job.failures += 1
            tried.add(replica)
            self._metrics.errors["retry"] += 1
        return False

    async def _pick(self, group: Group, key: int | None, tried: set[Replica]) -> Replica | None:
        """A replica with room, waiting for one while healthy replicas are all full."""
        queue = self._queues[group.name]
        deadline = None
        while True:
            replica = self._policy.route(group, key, tried)
            if replica is not None:
                assert isinstance(replica, Replica)
                return replica
            if not any(r.healthy and r not in tried for r in group.replicas):
                return None
            deadline = deadline or queue.deadline()
            await queue.wait(deadline)

    async def _attempt(
        self, job: Job, group: Group, replica: Replica, body: bytes, last_group: bool
    ) -> Outcome:
        replica.begin(self._loop.time())
        self._metrics.replica_requests[replica.name] += 1
        span = None
        if job.span is not None:
            span, job.trace_header = upstream_span(job.span, replica)
        outcome = Outcome.RETRY
        try:
            outcome = await self._exchange_with_retry_on_stale(job, replica, body, last_group)
            return outcome
        finally:
            replica.end(self._loop.time())
            self._queues[group.name].notify()
            if span is not None:
                span.set_attribute("taskyard.outcome", outcome.value)
                span.end()

    async def _exchange_with_retry_on_stale(
        self, job: Job, replica: Replica, body: bytes, last_group: bool
    ) -> Outcome:
        try:
            conn = await replica.conns.acquire()
            return await self._exchange(job, replica, conn, body, last_group)
        except UpstreamError as exc:
            if not (exc.reused and not exc.answered) or job.client.closed:
                return self._failed(job, replica, exc)
        # A kept-alive connection the replica had already closed: not the replica's fault.
        try:
            conn = await replica.conns.connect()
            return await self._exchange(job, replica, conn, body, last_group)
        except UpstreamError as exc:
            return self._failed(job, replica, exc)

    def _failed(self, job: Job, replica: Replica, exc: UpstreamError) -> Outcome:
        if job.client.closed:
            self._metrics.errors["client_gone"] += 1
            return Outcome.ANSWERED  # the client left; the abort was ours
        self._metrics.replica_failures[replica.name] += 1
        self._health.failed(replica, self._loop.time(), hard=not isinstance(exc, _SOFT_ERRORS))
        return Outcome.RETRY

    async def _exchange(
        self, job: Job, replica: Replica, conn: UpstreamConnection, body: bytes, last_group: bool
    ) -> Outcome:
        relay = None
        if job.request.stream:
            strip = not job.request.client_wants_usage
            relay = StreamRelay(job.client, lambda: self._answer_headers(replica, conn), strip)
        sink = _Sink(conn, relay)
        started = self._loop.time()
        conn.send(self._request_bytes(job, replica, body), sink, sink.flush if relay else None)
        job.client.bind_source(conn.abort, conn.transport)
        try:
            status = await conn.wait_head()
            now = self._loop.time()
            replica.observe_latency((now - started) * 1000, now)
            if relay is not None and status == 200:
                return await self._relay(job, replica, conn, relay)
            await conn.wait_done()
        finally:
            job.client.bind_source(None, None)
        replica.conns.release(conn)
        return self._answer(job, replica, conn, status, b"".join(sink.chunks), last_group)

    async def _relay(
        self, job: Job, replica: Replica, conn: UpstreamConnection, relay: StreamRelay
    ) -> Outcome:
        try:
            await conn.wait_done()
        except UpstreamError as exc:
            if not relay.started:
                raise
            # The usage chunk may have gone out before the break (a client that read it and
            # closed aborts the upstream's last read): what the replica said it used counts.
            self._account(job, *tokens_of(relay.usage))
            if job.client.closed:
                self._metrics.errors["client_gone"] += 1
                return Outcome.ANSWERED
            # Bytes went out: no retry. The client gets a clean error event instead.
            self._metrics.errors["stream_interrupted"] += 1
            self._metrics.replica_failures[replica.name] += 1
            relay.fail(f"the model replica failed mid-stream: {exc}")
            self._health.failed(replica, self._loop.time(), hard=True)
            return Outcome.ANSWERED
        relay.flush(done=True)  # a no-op when the last read already ended the stream
        replica.conns.release(conn)
        self._health.succeeded(replica)
        self._account(job, *tokens_of(relay.usage))
        return Outcome.ANSWERED

    def _answer(
        self,
        job: Job,
        replica: Replica,
        conn: UpstreamConnection,
        status: int,
        body: bytes,
        last_group: bool,
    ) -> Outcome:
        if status in _RETRY_STATUSES:
            if status != 429:
                self._health.failed(replica, self._loop.time(), hard=False)
            self._metrics.replica_failures[replica.name] += 1
            job.last_refusal = (status, self._answer_headers(replica, conn), body)
            return Outcome.RETRY
        if status == 400 and not last_group and _is_context_error(body):
            return Outcome.FALLBACK
        if status >= 500:
            self._health.failed(replica, self._loop.time(), hard=False)
        else:
            self._health.succeeded(replica)
        headers = self._answer_headers(replica, conn)
        if status == 200:
            prompt, completion = tokens_of(_usage_of(body))
            self._account(job, prompt, completion)
            headers.append((b"x-taskyard-usage", usage_header(prompt, completion)))
        job.client.respond(status, headers, body)
        return Outcome.ANSWERED

    def _account(self, job: Job, prompt: int, completion: int) -> None:
        # Per tenant only (budgets, metrics): a task's usage is the agent worker's record.
        self._limiter.charge(job.tenant, prompt + completion)
        self._metrics.record_usage(job.tenant.name, prompt, completion)

    @staticmethod
    def _request_bytes(job: Job, replica: Replica, body: bytes) -> bytes:
        path = replica.spec.base_path.encode() + job.path
        extra = job.trace_header
        if job.session_id:
            extra += b"x-session-id: " + job.session_id + b"\r\n"
        return b"POST %s HTTP/1.1\r\n%s%scontent-length: %d\r\n\r\n%s" % (
            path,
            replica.request_prefix,
            extra,
            len(body),
            body,
        )

    @staticmethod
    def _answer_headers(replica: Replica, conn: UpstreamConnection) -> list[tuple[bytes, bytes]]:
        headers = [pair for pair in conn.headers if pair[0] not in _HOP_HEADERS]
        headers.append((b"x-taskyard-replica", replica.name.encode()))
        return headers


def _is_context_error(body: bytes) -> bool:
    lowered = body.lower()
    return any(marker in lowered for marker in _CONTEXT_MARKERS)


def _usage_of(body: bytes) -> dict[str, object] | None:
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    return data.get("usage") if isinstance(data, dict) else None


class _Sink:
    """Where an upstream body goes: to the stream relay once the answer is a 200 stream,
    else into a buffer (a whole answer, or an error the client may never see)."""

    __slots__ = ("_conn", "_relay", "chunks")

    def __init__(self, conn: UpstreamConnection, relay: StreamRelay | None) -> None:
        self._conn = conn
        self._relay = relay
        self.chunks: list[bytes] = []

    def __call__(self, data: bytes) -> None:
        if self._relay is not None and self._conn.status == 200:
            self._relay.feed(data)
        else:
            self.chunks.append(data)

    def flush(self, done: bool) -> None:
        if self._relay is not None and self._conn.status == 200:
            self._relay.flush(done)
