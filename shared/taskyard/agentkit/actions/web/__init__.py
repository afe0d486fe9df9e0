"""The `WebBrowser` toolkit and its parts: SearxNG search, guarded page reads, readable text,
and the per-session stores of results and pages."""

from taskyard.agentkit.actions.web.addresses import AddressPolicy
from taskyard.agentkit.actions.web.browser import WebBrowser
from taskyard.agentkit.actions.web.errors import BlockedAddress, WebFailure
from taskyard.agentkit.actions.web.fetch import Page, PageFetcher
from taskyard.agentkit.actions.web.guard import (
    GuardedNetwork,
    GuardedTransport,
    Resolver,
    SystemResolver,
)
from taskyard.agentkit.actions.web.page_cache import MemoryPageCache, PageCache, RedisPageCache
from taskyard.agentkit.actions.web.readable import Readable, readable_html
from taskyard.agentkit.actions.web.result_store import (
    MemoryResultStore,
    RedisResultStore,
    ResultStore,
)
from taskyard.agentkit.actions.web.searxng import SearchHit, SearxngClient

__all__ = [
    "AddressPolicy",
    "BlockedAddress",
    "GuardedNetwork",
    "GuardedTransport",
    "MemoryPageCache",
    "MemoryResultStore",
    "Page",
    "PageCache",
    "PageFetcher",
    "Readable",
    "RedisPageCache",
    "RedisResultStore",
    "Resolver",
    "ResultStore",
    "SearchHit",
    "SearxngClient",
    "SystemResolver",
    "WebBrowser",
    "WebFailure",
    "readable_html",
]
