"""The web as the browser tool sees it: a SearxNG-style search API and page fetches.

HTTP failures become `ActionError`s with HTTP_ERROR here, at the boundary, so the toolkit
above only sees hits, page text, or a reason the model can read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from shared.actions.base import ActionError
from shared.actions.html_text import html_to_text
from shared.schema import ActionStatusCode

__all__ = ["SearchHit", "WebClient"]

_TEXT_TYPES = ("text/plain", "application/json", "text/markdown", "text/csv")


@dataclass(frozen=True)
class SearchHit:
    url: str
    title: str
    snippet: str


class WebClient:
    """Searches `search_url` (``GET /search?q=...&format=json``) and fetches pages as text."""

    def __init__(self, search_url: str, timeout: float = 15.0, top_k: int = 5) -> None:
        self.search_url = search_url.rstrip("/") + "/search"
        self.timeout = timeout
        self.top_k = top_k

    async def search(self, query: str) -> list[SearchHit]:
        """The first `top_k` results for `query`."""
        params = {"q": query, "format": "json"}
        body = (await self._get(self.search_url, params=params)).json()
        results = body.get("results", []) if isinstance(body, dict) else []
        return [_hit(item) for item in results[: self.top_k] if isinstance(item, dict)]

    async def fetch_text(self, url: str) -> str:
        """The readable text of the page at `url` (HTML is reduced to its visible text)."""
        if not url.startswith(("http://", "https://")):
            raise ActionError(f"can only open http(s) URLs, not {url!r}")
        response = await self._get(url)
        kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind in ("text/html", "application/xhtml+xml", ""):
            return html_to_text(response.text)
        if kind.startswith(_TEXT_TYPES):
            return response.text
        raise ActionError(f"{url} is {kind}, which cannot be shown as text")

    async def _get(self, url: str, params: dict[str, Any] | None = None) -> httpx.Response:
        try:
            async with httpx.AsyncClient(timeout=self.timeout, follow_redirects=True) as client:
                response = await client.get(url, params=params)
        except httpx.HTTPError as exc:
            error = f"request to {url} failed: {exc!r}"
            raise ActionError(error, ActionStatusCode.HTTP_ERROR) from exc
        if response.is_error:
            raise ActionError(
                f"{url} answered HTTP {response.status_code}", ActionStatusCode.HTTP_ERROR
            )
        return response


def _hit(item: dict[str, Any]) -> SearchHit:
    return SearchHit(
        url=str(item.get("url", "")),
        title=str(item.get("title", "")),
        snippet=str(item.get("content", "")),
    )
