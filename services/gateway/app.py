"""The gateway's FastAPI app: wiring only. Run: uvicorn services.gateway.app:app

It also serves the dashboard (`/ui`, static files), its Prometheus metrics (`/metrics`) and
MCP (`/mcp`, the default and each registered agent a tool: `resources/mcp/`)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.staticfiles import StaticFiles
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from starlette.exceptions import HTTPException as StarletteHTTPException

from services.gateway.admission import Admission
from services.gateway.errors import (
    artifacts_unavailable,
    http_error,
    not_replicated,
    server_error,
    store_unavailable,
    validation_error,
)
from services.gateway.metrics import RequestMetrics
from services.gateway.openapi import openapi_document
from services.gateway.resources.a2a import routes as a2a
from services.gateway.resources.approvals import routes as approvals
from services.gateway.resources.artifacts import routes as artifacts
from services.gateway.resources.files import routes as files
from services.gateway.resources.health import routes as health
from services.gateway.resources.mcp.routes import MCP_PATH, McpEndpoint
from services.gateway.resources.metrics import routes as metrics
from services.gateway.resources.schedules import routes as schedules
from services.gateway.resources.sessions import routes as sessions
from services.gateway.resources.system import routes as system
from services.gateway.resources.tasks import routes as tasks
from services.gateway.resources.webhooks import routes as webhooks
from taskyard.agentkit.registry import load_plugins
from taskyard.files.artifacts import ArtifactStoreUnavailable, make_artifact_store
from taskyard.plumbing.logs import setup_logging
from taskyard.plumbing.settings import GatewaySettings, get_settings
from taskyard.plumbing.tracing import setup_tracing
from taskyard.runtime.store import NotReplicated

UI_DIR = Path(__file__).with_name("ui")

__all__ = ["app", "create_app"]


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    # Async Redis clients live on the app's event loop: made on first use (`deps`), closed here.
    app.state.store = app.state.hub = app.state.system = app.state.transfer = None
    # The artifact store is made at start: a backend that cannot be made stops the gateway.
    app.state.artifacts = make_artifact_store(app.state.settings)
    async with app.state.mcp.run():
        yield
    state = app.state
    for used in (state.system, state.hub, state.transfer, state.store, state.artifacts):
        if used is not None:
            await used.close()


def _setup_logging() -> None:
    """JSON logs. uvicorn's access log stays off where `--no-access-log` turned it off (no
    handler, not propagating): `setup_logging` would route it to the root's handler again, a
    JSON line written per request."""
    access = logging.getLogger("uvicorn.access")
    off = not access.handlers and not access.propagate
    setup_logging("gateway")
    if off:
        access.propagate = False


def create_app(settings: GatewaySettings | None = None) -> FastAPI:
    """The gateway for `settings` (by default the environment's)."""
    settings = settings or get_settings(GatewaySettings)
    _setup_logging()
    tracing = setup_tracing("gateway", settings)
    load_plugins(settings.plugin_modules)  # user tools and agents are valid task names
    app = FastAPI(
        title="taskyard gateway",
        description="Submit tool-using agent tasks, read them, follow them live (SSE).",
        version="0.1.0",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.add_middleware(
        Admission,
        tenants=settings.tenants_by_key(),
        max_body_bytes=settings.gateway_max_body_bytes,
        large=[files.upload_limit(settings)],
    )
    app.add_middleware(RequestMetrics)  # outside `Admission`: refused requests count too
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(RedisConnectionError, store_unavailable)  # BusyLoading too
    app.add_exception_handler(RedisTimeoutError, store_unavailable)
    app.add_exception_handler(NotReplicated, not_replicated)
    app.add_exception_handler(ArtifactStoreUnavailable, artifacts_unavailable)
    app.add_exception_handler(Exception, server_error)
    app.include_router(tasks.router)
    app.include_router(approvals.router)
    app.include_router(sessions.router)
    app.include_router(schedules.router)
    app.include_router(webhooks.router)
    app.include_router(system.router)
    app.include_router(artifacts.router)
    app.include_router(files.router)
    app.include_router(health.router)
    app.include_router(metrics.router)
    app.include_router(a2a.router)
    app.mount("/ui", StaticFiles(directory=UI_DIR, html=True), name="ui")
    app.state.mcp = McpEndpoint(settings)
    app.add_route(MCP_PATH, app.state.mcp.asgi, methods=["GET", "POST", "DELETE"])
    if tracing:
        # Each request a span; not one per SSE chunk sent.
        FastAPIInstrumentor.instrument_app(
            app, excluded_urls="/healthz,/readyz,/metrics,/ui", exclude_spans=["receive", "send"]
        )
    app.openapi = lambda: openapi_document(app)  # type: ignore[method-assign]
    return app


app = create_app()
