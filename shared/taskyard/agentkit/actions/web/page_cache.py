"""Where `WebBrowser` keeps the pages a session opened, so opening one again reads no network.

Per session, like the search results: a page one session opened is never served to another
(what a page shows may depend on who asked, and sessions must not learn of each other). In the
services the pages live in Redis for `ttl_s` (`RedisPageCache`), shared by every tool worker; a
single process can keep them in memory (`MemoryPageCache`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Protocol

import redis

from taskyard.agentkit.actions.web.fetch import Page
from taskyard.plumbing import keys

__all__ = ["MemoryPageCache", "PageCache", "RedisPageCache"]


class PageCache(Protocol):
    """The pages a session opened, by the URL it asked for."""

    def get(self, session_id: str, url: str) -> Page | None: ...

    def put(self, session_id: str, url: str, page: Page) -> None: ...


class MemoryPageCache:
    """Pages in this process, at most `max_pages` of them (the least recently used dropped)."""

    def __init__(self, max_pages: int = 256) -> None:
        self.max_pages = max_pages
        self._pages: OrderedDict[tuple[str, str], Page] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, session_id: str, url: str) -> Page | None:
        with self._lock:
            page = self._pages.get((session_id, url))
            if page is not None:
                self._pages.move_to_end((session_id, url))
            return page

    def put(self, session_id: str, url: str, page: Page) -> None:
        with self._lock:
            self._pages[(session_id, url)] = page
            self._pages.move_to_end((session_id, url))
            while len(self._pages) > self.max_pages:
                self._pages.popitem(last=False)


class RedisPageCache:
    """Pages in Redis, each expiring `ttl_s` after it was read (sync calls: see
    `RedisResultStore`)."""

    def __init__(self, client: redis.Redis, ttl_s: int = 3600) -> None:
        self.client = client
        self.ttl_s = ttl_s

    def get(self, session_id: str, url: str) -> Page | None:
        data = self.client.get(keys.browser_page(session_id, url))
        return Page.model_validate_json(data) if data else None

    def put(self, session_id: str, url: str, page: Page) -> None:
        data = page.model_dump_json()
        self.client.set(keys.browser_page(session_id, url), data, ex=self.ttl_s)
