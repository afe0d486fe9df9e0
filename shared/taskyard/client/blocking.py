"""`TaskyardClient`, derived from the async core: each method runs the core's coroutine over
`BlockingIO`, whose coroutines never suspend, so it completes on its first step with no event
loop (`taskyard.plumbing.no_suspend`, which drives the sync agents too). It works in a plain
script and in a thread that runs an event loop alike, and Ctrl-C stops it where it blocks.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Concatenate, ParamSpec, TypeVar

import httpx

from taskyard.client import wire
from taskyard.client.core import ClientCore
from taskyard.client.io import BlockingIO
from taskyard.plumbing.no_suspend import finish, iterate

__all__ = ["TaskyardClient"]

P = ParamSpec("P")
T = TypeVar("T")


def _suspended() -> RuntimeError:
    return RuntimeError("the blocking client's I/O suspended: it must use BlockingIO only")


def _blocking(
    method: Callable[Concatenate[ClientCore, P], Awaitable[T]],
) -> Callable[Concatenate[TaskyardClient, P], T]:
    """The core's coroutine method as a blocking method (its signature and docstring kept)."""

    @functools.wraps(method)
    def call(self: TaskyardClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return finish(method(self._core, *args, **kwargs), _suspended)

    return call


def _iterated(
    method: Callable[Concatenate[ClientCore, P], AsyncIterator[T]],
) -> Callable[Concatenate[TaskyardClient, P], Iterator[T]]:
    """The core's stream method as one returning a blocking iterator."""

    @functools.wraps(method)
    def call(self: TaskyardClient, /, *args: P.args, **kwargs: P.kwargs) -> Iterator[T]:
        return iterate(method(self._core, *args, **kwargs), _suspended)

    return call


class TaskyardClient:
    """A thin, blocking client over the gateway's HTTP API: the methods of
    `AsyncTaskyardClient`, not awaited (`events` is a plain iterator)."""

    def __init__(self, base_url: str, api_key: str, timeout: float = 30.0) -> None:
        self.http = httpx.Client(base_url=base_url, headers=wire.auth(api_key), timeout=timeout)
        self._core = ClientCore(BlockingIO(self.http))

    submit = _blocking(ClientCore.submit)
    get = _blocking(ClientCore.get)
    list_tasks = _blocking(ClientCore.list_tasks)
    cancel = _blocking(ClientCore.cancel)
    approve = _blocking(ClientCore.approve)
    deny = _blocking(ClientCore.deny)
    events = _iterated(ClientCore.events)
    session = _blocking(ClientCore.session)
    delete_session = _blocking(ClientCore.delete_session)
    fork_session = _blocking(ClientCore.fork_session)
    list_sessions = _blocking(ClientCore.list_sessions)
    create_schedule = _blocking(ClientCore.create_schedule)
    list_schedules = _blocking(ClientCore.list_schedules)
    schedule = _blocking(ClientCore.schedule)
    schedule_runs = _blocking(ClientCore.schedule_runs)
    delete_schedule = _blocking(ClientCore.delete_schedule)
    system = _blocking(ClientCore.system)
    webhook_secret = _blocking(ClientCore.webhook_secret)
    upload = _blocking(ClientCore.upload)
    files = _blocking(ClientCore.files)
    download = _blocking(ClientCore.download)
    artifacts = _blocking(ClientCore.artifacts)
    save_artifact = _blocking(ClientCore.save_artifact)
    close = _blocking(ClientCore.close)

    def __enter__(self) -> TaskyardClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
