"""The gateway's FastAPI app: wiring only. Run: uvicorn services.gateway.app:app"""

from __future__ import annotations

from fastapi import FastAPI

from services.gateway.routes import health, tasks
from shared.logs import setup_logging

__all__ = ["app", "create_app"]


def create_app() -> FastAPI:
    setup_logging()
    app = FastAPI(
        title="taskyard gateway",
        description="Submit tool-using agent tasks, read them, follow them live (SSE).",
        version="0.1.0",
    )
    app.include_router(tasks.router)
    app.include_router(health.router)
    return app


app = create_app()
