"""`WebBrowser`: search the web, then open a result or any URL. Results are kept per session
(Lagent keeps one list per tool instance, which every session would share)."""

from __future__ import annotations

from typing import Self

from shared.actions.api import tool_api
from shared.actions.base import ActionError, ActionResources, BaseAction
from shared.actions.registry import register_action
from shared.actions.search_results import MemoryResultStore, RedisResultStore, ResultStore
from shared.actions.web_client import SearchHit, WebClient

__all__ = ["WebBrowser"]


@register_action
class WebBrowser(BaseAction):
    """Search the web and read pages: `search` lists numbered results, `select` opens one of
    them by its number, `open` reads any http(s) URL."""

    def __init__(
        self, client: WebClient, results: ResultStore | None = None, max_chars: int = 8000
    ) -> None:
        self.client = client
        self.results = results or MemoryResultStore()
        self.max_chars = max_chars

    @classmethod
    def build(cls, resources: ActionResources) -> Self:
        """Results go to Redis, so any tool worker can serve a session's `select`."""
        s = resources.settings
        client = WebClient(s.search_url, s.search_timeout_s, s.search_top_k)
        results = RedisResultStore.from_url(s.redis_url, s.search_results_ttl_s)
        return cls(client, results, s.browse_max_chars)

    @tool_api
    async def search(self, query: str, session_id: str) -> str:
        """Search the web.

        Args:
            query: what to search for
        """
        hits = await self.client.search(query)
        self.results.save(session_id, hits)
        if not hits:
            return f"No results for {query!r}."
        return "\n\n".join(_describe(i, hit) for i, hit in enumerate(hits))

    @tool_api
    async def select(self, index: int, session_id: str) -> str:
        """Open a result of this session's latest search.

        Args:
            index: the number the result was listed under
        """
        hits = self.results.load(session_id)
        if not hits:
            raise ActionError("this session has no search results: call WebBrowser.search first")
        if not 0 <= index < len(hits):
            raise ActionError(f"no result {index}: the latest search listed 0 to {len(hits) - 1}")
        return await self.open(hits[index].url)

    @tool_api
    async def open(self, url: str) -> str:
        """Read the text of a web page.

        Args:
            url: the page's http(s) address
        """
        text = await self.client.fetch_text(url)
        if len(text) > self.max_chars:
            text = text[: self.max_chars] + f"\n[... cut at {self.max_chars} characters]"
        return f"{url}\n\n{text}"


def _describe(index: int, hit: SearchHit) -> str:
    return f"[{index}] {hit.title}\n{hit.url}\n{hit.snippet}".rstrip()
