"""The proxy application: endpoints, and the wiring of pool, routing, health, limits and usage."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

import orjson
from opentelemetry.trace import StatusCode

from services.llm_proxy.accounting.metrics import Metrics
from services.llm_proxy.errors import BodyTooLarge, NoReplica, NotFound, ProxyError, RateLimited
from services.llm_proxy.http.payload import parse_request
from services.llm_proxy.http.tracing import server_span
from services.llm_proxy.limits.admission import WaitQueue
from services.llm_proxy.limits.ratelimit import RateLimiter
from services.llm_proxy.limits.redis_sync import RedisSync
from services.llm_proxy.limits.tenants import Tenant, TenantDirectory
from services.llm_proxy.replicas.forward import Forwarder, Job
from services.llm_proxy.replicas.health import HealthChecker, HealthPolicy
from services.llm_proxy.replicas.pool import Pool
from services.llm_proxy.replicas.spec import PoolSpec, load_pool
from services.llm_proxy.routing.fleet import FleetView
from services.llm_proxy.routing.policies import ReplicaState, make_policy
from services.llm_proxy.routing.redis_sync import PlacementSync
from services.llm_proxy.settings import ProxySettings
from taskyard.http1 import Connection, HttpServer, Request, listen_socket
from taskyard.plumbing.tenant_credentials import TenantCredentials

__all__ = ["ProxyApp"]

log = logging.getLogger(__name__)

_JSON = [(b"content-type", b"application/json")]
_INTERNAL = ProxyError("internal proxy error")

Endpoint = Callable[[Request, Connection], Awaitable[None]]


class ProxyApp:
    """One proxy instance; `await start()` serves it, `await stop()` ends it."""

    def __init__(
        self, settings: ProxySettings, pool_spec: PoolSpec | None = None, tracing: bool = False
    ) -> None:
        self.settings = settings
        self.tracing = tracing  # spans per completion request (`taskyard.plumbing.tracing` set up)
        self.pool = Pool(pool_spec or load_pool(settings), settings)
        self.queues = {
            name: WaitQueue(settings.proxy_queue_size, settings.proxy_queue_timeout_s)
            for name in {r.spec.model for r in self.pool.replicas}
        }
        self.metrics = Metrics(self.pool, self.queues)
        self.limiter = RateLimiter(settings.proxy_rate_window_s)
        secret = settings.llm_token_secret.get_secret_value()
        self.tenants = TenantDirectory(
            settings.proxy_keys, settings.llm_api_key, settings.proxy_require_key,
            TenantCredentials(secret) if secret else None, settings.proxy_tenant_limits,
        )  # fmt: skip
        self._health_policy = HealthPolicy(
            settings.proxy_eject_after, settings.proxy_cooldown_s, settings.proxy_max_cooldown_s
        )
        self._server = HttpServer(self.handle, settings.proxy_max_body_bytes)
        self._routes: dict[tuple[bytes, bytes], tuple[str, Endpoint]] = {
            (b"POST", b"/v1/chat/completions"): ("chat", self._chat),
            (b"POST", b"/v1/completions"): ("completions", self._completions),
            (b"GET", b"/v1/models"): ("models", self._models),
            (b"GET", b"/healthz"): ("healthz", self._healthz),
            (b"GET", b"/readyz"): ("readyz", self._readyz),
            (b"GET", b"/metrics"): ("metrics", self._metrics),
        }
        self._forwarder: Forwarder | None = None
        self._checker: HealthChecker | None = None
        self._sync: RedisSync | None = None
        self._placement_sync: PlacementSync | None = None
        self._shares_placements = (
            settings.proxy_redis_sync
            and settings.proxy_share_placements
            and settings.proxy_policy == "affinity"
        )
        self._view: FleetView[ReplicaState] = FleetView(
            settings.proxy_key_live_s,
            settings.proxy_placement_ttl_s,
            publish=self._shares_placements,
        )
        self.port = 0

    async def start(self, host: str | None = None, port: int | None = None) -> int:
        """Start the background jobs (probes, Redis syncs) and listen; returns the bound port."""
        s = self.settings
        policy = make_policy(s.proxy_policy, s.proxy_load_factor, s.proxy_slow_factor, self._view)
        self._forwarder = Forwarder(
            self.pool,
            policy,
            self._health_policy,
            self.queues,
            self.limiter,
            self.metrics,
            s.proxy_max_retries,
        )
        self._checker = HealthChecker(
            self.pool, self._health_policy, s.proxy_probe_interval_s, s.proxy_probe_timeout_s
        )
        self._checker.start()
        self._start_syncs()
        sock = listen_socket(host or s.proxy_host, s.proxy_port if port is None else port)
        self.port = await self._server.start(sock)
        return self.port

    def _start_syncs(self) -> None:
        # Rate-limit spending, and placements and load, shared with the other instances.
        s = self.settings
        redis_url = s.proxy_redis_url or s.redis_url
        if s.proxy_redis_sync:
            self._sync = RedisSync(
                redis_url, self.limiter, self.metrics, s.proxy_sync_interval_s, s.sentinel
            )
            self._sync.start()
        if self._shares_placements:
            self._placement_sync = PlacementSync(
                redis_url, self._view, self.pool.replicas, self.metrics,
                s.proxy_placement_sync_s, s.proxy_placement_ttl_s, s.proxy_key_live_s,
                sentinel=s.sentinel,
            )  # fmt: skip
            self._placement_sync.start()

    async def stop(self) -> None:
        """Stop listening, let requests in progress finish (up to `proxy_drain_s`), then stop
        the background jobs (flushing rate-limit spending and placements to Redis)."""
        await self._server.close(self.settings.proxy_drain_s)
        if self._checker is not None:
            await self._checker.stop()
        if self._sync is not None:
            await self._sync.stop()
        if self._placement_sync is not None:
            await self._placement_sync.stop()
        self.pool.close()

    async def handle(self, request: Request, conn: Connection) -> None:
        """Dispatch one request; every error becomes an OpenAI-style JSON answer."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        path = request.path
        name, endpoint = self._routes.get((request.method, path), ("unknown", self._not_found))
        try:
            await endpoint(request, conn)
        except ProxyError as exc:
            self._fail(conn, exc)
        except Exception:
            log.exception("unexpected error on %s", path)
            self._fail(conn, _INTERNAL)
        self.metrics.request_done(name, conn.status, loop.time() - started)

    def _fail(self, conn: Connection, exc: ProxyError) -> None:
        self.metrics.errors[type(exc).__name__] += 1
        if conn.response_started:
            conn.abort()  # mid-response: a second head would corrupt the stream
        else:
            conn.respond(exc.status, exc.headers(), exc.body())

    # --- endpoints --------------------------------------------------------------------------

    async def _chat(self, request: Request, conn: Connection) -> None:
        await self._complete(request, conn, chat=True, path=b"/chat/completions")

    async def _completions(self, request: Request, conn: Connection) -> None:
        await self._complete(request, conn, chat=False, path=b"/completions")

    async def _complete(self, request: Request, conn: Connection, chat: bool, path: bytes) -> None:
        headers = request.headers
        caller = self.tenants.authenticate(
            headers.get(b"authorization"), headers.get(b"x-task-id"),
            headers.get(b"x-taskyard-tenant"),
        )  # fmt: skip
        if request.body_too_large:
            raise BodyTooLarge(
                f"the body is larger than {self.settings.proxy_max_body_bytes} bytes"
            )
        session = headers.get(b"x-session-id")
        parsed = parse_request(request.body, chat, session, self.settings.proxy_prefix_chars)
        self._admit(caller.tenant)
        job = Job(conn, path, parsed, caller.tenant, caller.task_id, session)
        if self.tracing:
            await self._traced(job, request)
        else:
            await self._forward(job)

    def _admit(self, tenant: Tenant) -> None:
        try:
            self.limiter.admit(tenant)
        except RateLimited:
            self.metrics.tenant_requests[tenant.name, "rate_limited"] += 1
            raise
        self.metrics.tenant_requests[tenant.name, "admitted"] += 1

    async def _forward(self, job: Job) -> None:
        assert self._forwarder is not None
        await self._forwarder.forward(job)

    async def _traced(self, job: Job, request: Request) -> None:
        job.span = span = server_span(request, job.path.decode().lstrip("/"))
        try:
            await self._forward(job)
        except ProxyError as exc:
            span.set_status(StatusCode.ERROR, str(exc))
            span.set_attribute("http.response.status_code", exc.status)
            raise
        else:
            span.set_attribute("http.response.status_code", job.client.status)
        finally:
            span.end()

    async def _models(self, request: Request, conn: Connection) -> None:
        windows = self.pool.context_lengths()
        data = [
            {"id": name, "object": "model", "created": 0, "owned_by": "taskyard"}
            | ({"max_model_len": windows[name]} if name in windows else {})
            for name in self.pool.model_names()
        ]
        conn.respond(200, _JSON, orjson.dumps({"object": "list", "data": data}))

    async def _healthz(self, request: Request, conn: Connection) -> None:
        conn.respond(200, _JSON, b'{"status":"ok"}')

    async def _readyz(self, request: Request, conn: Connection) -> None:
        healthy = sum(r.healthy for r in self.pool.replicas)
        if not healthy:
            raise NoReplica("no replica is healthy", retry_after=1)
        body = {"status": "ready", "healthy_replicas": healthy, "replicas": len(self.pool.replicas)}
        conn.respond(200, _JSON, orjson.dumps(body))

    async def _metrics(self, request: Request, conn: Connection) -> None:
        conn.respond(200, [(b"content-type", b"text/plain; version=0.0.4")], self.metrics.render())

    async def _not_found(self, request: Request, conn: Connection) -> None:
        raise NotFound(f"no route for {request.method.decode()} {request.path.decode()}")
