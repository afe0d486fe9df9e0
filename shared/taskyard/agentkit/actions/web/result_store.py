"""Where `WebBrowser` keeps each session's latest search results.

In the services a session's `search` and its `select` may run on different tool workers, so
the results live in Redis (`RedisResultStore`). A single process (library use, tests) can keep
them in memory (`MemoryResultStore`). Both are keyed by session, never shared between sessions.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import asdict
from typing import Protocol

import redis

from taskyard.agentkit.actions.web.searxng import SearchHit
from taskyard.plumbing import keys

__all__ = ["MemoryResultStore", "RedisResultStore", "ResultStore"]


class ResultStore(Protocol):
    """A session's latest search results."""

    def save(self, session_id: str, hits: list[SearchHit]) -> None: ...

    def load(self, session_id: str) -> list[SearchHit]: ...


class MemoryResultStore:
    """Results in this process, for at most `max_sessions` sessions (least recent dropped)."""

    def __init__(self, max_sessions: int = 1024) -> None:
        self.max_sessions = max_sessions
        self._results: OrderedDict[str, list[SearchHit]] = OrderedDict()
        self._lock = threading.Lock()

    def save(self, session_id: str, hits: list[SearchHit]) -> None:
        with self._lock:
            self._results[session_id] = hits
            self._results.move_to_end(session_id)
            while len(self._results) > self.max_sessions:
                self._results.popitem(last=False)

    def load(self, session_id: str) -> list[SearchHit]:
        with self._lock:
            if session_id in self._results:
                self._results.move_to_end(session_id)
            return self._results.get(session_id, [])


class RedisResultStore:
    """Results in Redis, expiring `ttl_s` after the session's latest search.

    Sync redis calls are fine inside the async toolkit: one loopback round trip, far below
    the HTTP requests around it, and the client's pool works for any thread or event loop.
    """

    def __init__(self, client: redis.Redis, ttl_s: int = 3600) -> None:
        self.client = client
        self.ttl_s = ttl_s

    def save(self, session_id: str, hits: list[SearchHit]) -> None:
        data = json.dumps([asdict(hit) for hit in hits])
        self.client.set(keys.browser_results(session_id), data, ex=self.ttl_s)

    def load(self, session_id: str) -> list[SearchHit]:
        data = self.client.get(keys.browser_results(session_id))
        return [SearchHit(**hit) for hit in json.loads(data)] if data else []
