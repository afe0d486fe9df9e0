"""The gateway's FastAPI app: wiring only. Run: uvicorn services.gateway.app:app"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from services.gateway.routes import health, tasks
from shared.logs import setup_logging
from shared.registry import load_plugins
from shared.settings import get_settings

__all__ = ["app", "create_app"]


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    # Async Redis clients live on the app's event loop: made on first use, closed here.
    app.state.stores = {}
    app.state.hubs = {}
    yield
    for hub in app.state.hubs.values():
        await hub.close()
    for store in app.state.stores.values():
        await store.close()


def create_app() -> FastAPI:
    setup_logging()
    load_plugins(get_settings().plugin_modules)  # user tools and agents are valid task names
    app = FastAPI(
        title="taskyard gateway",
        description="Submit tool-using agent tasks, read them, follow them live (SSE).",
        version="0.1.0",
        lifespan=lifespan,
    )
    app.include_router(tasks.router)
    app.include_router(health.router)
    return app


app = create_app()
