"""Unique ids without a system call (shared/taskyard/plumbing/ids.py): well formed, never
repeated, not even by a forked child or after code seeds `random`; and the ids a job takes on
its way through the broker come from them."""

from __future__ import annotations

import json
import os
import random
import uuid
from collections.abc import Iterator

import pytest
from celery import Celery

from taskyard.plumbing.ids import unique_hex, unique_uuid
from taskyard.runtime.jobs import AgentStepJob, envelope


@pytest.fixture
def no_urandom(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """`os.urandom` (what `uuid.uuid4` and `secrets` read) fails while it is in use."""

    def refused(size: int) -> bytes:
        raise AssertionError("a system call for an id")

    monkeypatch.setattr(os, "urandom", refused)
    yield


def test_a_unique_uuid_is_a_version_4_uuids_text() -> None:
    drawn = [unique_uuid() for _ in range(10_000)]
    assert len(set(drawn)) == len(drawn)
    for text in drawn[:100]:
        parsed = uuid.UUID(text)
        assert str(parsed) == text and parsed.version == 4


def test_unique_hex_has_as_many_digits_as_asked() -> None:
    drawn = [unique_hex(16) for _ in range(10_000)]
    assert len(set(drawn)) == len(drawn)
    assert all(len(text) == 16 and int(text, 16) >= 0 for text in drawn)


def test_ids_make_no_system_call(no_urandom: None) -> None:
    unique_uuid(), unique_hex(16)
    with pytest.raises(AssertionError, match="system call"):
        uuid.uuid4()  # what the ids replace


def test_seeding_random_does_not_repeat_ids() -> None:
    state = random.getstate()
    try:
        random.seed(7)
        first = unique_uuid()
        random.seed(7)
        assert unique_uuid() != first
    finally:
        random.setstate(state)  # the rest of the run draws as it would have


def test_a_forked_child_draws_other_ids_than_its_parent() -> None:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, to the parent
        os.write(write, " ".join(unique_uuid() for _ in range(5)).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read) as pipe:
        childs = set(pipe.read().split())
    parents = {unique_uuid() for _ in range(5)}
    assert len(childs) == 5 and not childs & parents


def test_a_jobs_envelope_takes_its_ids_without_a_system_call(no_urandom: None) -> None:
    celery = Celery("ids", set_as_current=False)
    job = AgentStepJob(task_id="task_1", step=0, tenant="t", session_id="s")
    ids = [_ids(envelope(celery, job).message) for _ in range(2)]
    for task_id, delivery_tag in ids:
        assert uuid.UUID(task_id).version == uuid.UUID(delivery_tag).version == 4
    assert len({*ids[0], *ids[1]}) == 4


def _ids(message: str) -> tuple[str, str]:
    """A kombu message's Celery task id and delivery tag."""
    wrapped = json.loads(message)
    return wrapped["headers"]["id"], wrapped["properties"]["delivery_tag"]
