"""The Celery app every worker runs: once a worker is ready, its start-up heap is frozen out
of the cyclic collector's walks and the young generation is collected less often."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from celery import signals

from taskyard.plumbing import celery_app


@pytest.fixture
def collector() -> Iterator[None]:
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


@pytest.mark.usefixtures("collector")
def test_a_ready_worker_freezes_its_start_up_heap() -> None:
    gc.unfreeze()
    built = {"kept": ["for the worker's life"]}  # as a worker's start-up builds its objects
    assert _walked(built)
    signals.worker_ready.send(sender=None)  # what a worker sends once it consumes
    assert not _walked(built) and gc.get_freeze_count() > 0
    assert gc.get_threshold()[0] == celery_app._GC_YOUNG
    made_later = {"a step's": ["objects"]}
    assert _walked(made_later)  # collected as ever


def _walked(thing: object) -> bool:
    """Whether the cyclic collector's generations hold `thing` (frozen ones are not walked)."""
    return any(held is thing for held in gc.get_objects())
