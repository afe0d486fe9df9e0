"""Routes whose JSON bodies orjson parses: in one pass, faster than the standard library, and
strictly. Text no store can encode (a lone surrogate such as ``"\\ud800"``), NaN and infinities
are invalid JSON here, so they get FastAPI's 422 for invalid JSON and never reach a task."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

import orjson
from fastapi import Request, Response
from fastapi.routing import APIRoute

__all__ = ["JSONRoute"]


class _OrjsonRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            # orjson.JSONDecodeError is a json.JSONDecodeError: FastAPI makes it the 422.
            self._json = orjson.loads(await self.body())
        return self._json


class JSONRoute(APIRoute):
    """An `APIRoute` that hands its endpoint an orjson-parsing request."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def orjson_handler(request: Request) -> Response:
            return await handler(_OrjsonRequest(request.scope, request.receive))

        return orjson_handler
