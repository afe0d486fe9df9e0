"""`WebBrowser`: search the web, then open a result or any URL. Results and opened pages are
kept per session (Lagent keeps one list per tool instance, which every session would share)."""

from __future__ import annotations

from typing import Self

from taskyard.agentkit.actions.api import tool_api
from taskyard.agentkit.actions.base import ActionError, ActionResources, BaseAction
from taskyard.agentkit.actions.registry import register_action
from taskyard.agentkit.actions.web.addresses import AddressPolicy
from taskyard.agentkit.actions.web.fetch import Page, PageFetcher
from taskyard.agentkit.actions.web.page_cache import MemoryPageCache, PageCache, RedisPageCache
from taskyard.agentkit.actions.web.result_store import (
    MemoryResultStore,
    RedisResultStore,
    ResultStore,
)
from taskyard.agentkit.actions.web.searxng import SearchHit, SearxngClient
from taskyard.plumbing.redis_clients import sync_client

__all__ = ["WebBrowser"]


@register_action
class WebBrowser(BaseAction):
    """Search the web and read pages: `search` lists numbered results, `select` opens one of
    them by its number, `open` reads any http(s) URL."""

    def __init__(
        self,
        engine: SearxngClient,
        fetcher: PageFetcher,
        results: ResultStore | None = None,
        pages: PageCache | None = None,
        max_chars: int = 8000,
    ) -> None:
        self.engine = engine
        self.fetcher = fetcher
        self.results = results or MemoryResultStore()
        self.pages = pages or MemoryPageCache()
        self.max_chars = max_chars

    @classmethod
    def build(cls, resources: ActionResources) -> Self:
        """Results and pages go to Redis, so any tool worker can serve a session's next call."""
        s = resources.settings
        engines = tuple(name.strip() for name in s.search_engines.split(",") if name.strip())
        engine = SearxngClient(s.search_url, engines, s.search_timeout_s, s.search_top_k)
        policy = AddressPolicy(s.browse_allow_private, s.browse_allow_networks)
        fetcher = PageFetcher(policy, timeout_s=s.browse_timeout_s, max_bytes=s.browse_max_bytes)
        client = sync_client(s.redis_url, s.sentinel)
        results = RedisResultStore(client, s.search_results_ttl_s)
        pages = RedisPageCache(client, s.browse_cache_ttl_s)
        return cls(engine, fetcher, results, pages, s.browse_max_chars)

    @tool_api
    async def search(self, query: str, session_id: str) -> str:
        """Search the web.

        Args:
            query: what to search for
        """
        hits = await self.engine.search(query)
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
        return await self.open(hits[index].url, session_id)

    @tool_api
    async def open(self, url: str, session_id: str) -> str:
        """Read the text of a web page.

        Args:
            url: the page's http(s) address
        """
        page = self.pages.get(session_id, url)
        if page is None:
            page = await self.fetcher.fetch(url)
            self.pages.put(session_id, url, page)
        return _show(page, self.max_chars)


def _describe(index: int, hit: SearchHit) -> str:
    return f"[{index}] {hit.title}\n{hit.url}\n{hit.snippet}".rstrip()


def _show(page: Page, max_chars: int) -> str:
    text = page.text or "(the page has no readable text)"
    if page.title and not text.startswith(page.title):
        text = f"{page.title}\n\n{text}"
    if len(text) > max_chars:
        text = text[:max_chars] + f"\n[... cut at {max_chars} characters]"
    elif page.truncated:
        text += "\n[... the page is longer than the browser reads]"
    return f"{page.url}\n\n{text}"
