"""The gateway's FastAPI app: wiring only. Run: uvicorn services.gateway.app:app"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError

from services.gateway.errors import method_not_allowed, server_error, validation_error
from services.gateway.guard import Guard
from services.gateway.openapi import openapi_document
from services.gateway.routes import artifacts, files, health, tasks
from shared.logs import setup_logging
from shared.registry import load_plugins
from shared.settings import Settings, get_settings

__all__ = ["app", "create_app"]


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    # Async Redis clients live on the app's event loop: made on first use, closed here.
    app.state.stores = {}
    app.state.hubs = {}
    app.state.transfers = {}
    yield
    for hub in app.state.hubs.values():
        await hub.close()
    for transfer in app.state.transfers.values():
        await transfer.r.aclose()
    for store in app.state.stores.values():
        await store.close()


def create_app(settings: Settings | None = None) -> FastAPI:
    """The gateway for `settings` (by default the environment's)."""
    settings = settings or get_settings()
    setup_logging()
    load_plugins(settings.plugin_modules)  # user tools and agents are valid task names
    app = FastAPI(
        title="taskyard gateway",
        description="Submit tool-using agent tasks, read them, follow them live (SSE).",
        version="0.1.0",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.add_middleware(
        Guard,
        tenants=settings.tenants_by_key(),
        max_body_bytes=settings.gateway_max_body_bytes,
        large=[files.upload_limit(settings)],
    )
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(405, method_not_allowed)
    app.add_exception_handler(Exception, server_error)
    app.include_router(tasks.router)
    app.include_router(artifacts.router)
    app.include_router(files.router)
    app.include_router(health.router)
    app.openapi = lambda: openapi_document(app)  # type: ignore[method-assign]
    return app


app = create_app()
