"""Web search through a SearxNG instance's JSON API (``GET {url}/search?q=..&format=json``).

The instance is the operator's own (configured, not chosen by the model), so its address is
not subject to the page guard. It must list ``json`` in ``search.formats``; SearxNG answers
403 otherwise (deploy/searxng/settings.yml turns it on).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import httpx
from pydantic import BaseModel, ConfigDict, ValidationError

from taskyard.agentkit.actions.web.errors import WebFailure

__all__ = ["SearchHit", "SearxngClient"]


@dataclass(frozen=True)
class SearchHit:
    url: str
    title: str
    snippet: str


class _Result(BaseModel):
    model_config = ConfigDict(extra="ignore")

    url: str = ""
    title: str = ""
    content: str | None = ""


class _Answer(BaseModel):
    """The part of SearxNG's answer we read; engines that failed come as [name, reason]."""

    model_config = ConfigDict(extra="ignore")

    results: list[_Result] = []
    unresponsive_engines: list[list[str]] = []


class SearxngClient:
    """Searches `url` with `engines` (SearxNG's own defaults when empty), `top_k` hits a query."""

    def __init__(
        self,
        url: str,
        engines: tuple[str, ...] = (),
        timeout_s: float = 15.0,
        top_k: int = 5,
    ) -> None:
        self.search_url = url.rstrip("/") + "/search"
        self.engines = engines
        self.timeout_s = timeout_s
        self.top_k = top_k

    async def search(self, query: str) -> list[SearchHit]:
        """The first `top_k` hits for `query`; a `WebFailure` when the engines all failed."""
        answer = await self._ask(query)
        hits = [_hit(result) for result in answer.results if result.url][: self.top_k]
        if not hits and answer.unresponsive_engines:
            failed = ", ".join(": ".join(engine) for engine in answer.unresponsive_engines)
            raise WebFailure(f"the search engines did not answer ({failed}); try again later")
        return hits

    async def _ask(self, query: str) -> _Answer:
        params = {"q": query, "format": "json"}
        if self.engines:
            params["engines"] = ",".join(self.engines)
        try:
            async with asyncio.timeout(self.timeout_s), httpx.AsyncClient() as client:
                response = await client.get(self.search_url, params=params, timeout=self.timeout_s)
        except (TimeoutError, httpx.TimeoutException) as exc:
            raise WebFailure(f"the search took longer than {self.timeout_s:g} s") from exc
        except httpx.HTTPError as exc:
            raise WebFailure(f"request to {self.search_url} failed: {exc!r}") from exc
        if response.status_code == 403:
            raise WebFailure(
                f"{self.search_url} refused format=json (HTTP 403): "
                "SearxNG must list json in search.formats"
            )
        if response.is_error:
            raise WebFailure(f"{self.search_url} answered HTTP {response.status_code}")
        try:
            return _Answer.model_validate_json(response.content)
        except ValidationError as exc:
            raise WebFailure(f"{self.search_url} did not answer SearxNG's JSON") from exc


def _hit(result: _Result) -> SearchHit:
    return SearchHit(url=result.url, title=result.title, snippet=result.content or "")
