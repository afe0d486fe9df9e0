"""The Lua boundary by name: each script reads its keys by the names its keys type gives them,
and an answer that is not what its model says fails loudly, never read as something else."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import ValidationError
from store_support import created

from taskyard.plumbing import keys
from taskyard.runtime.store import TaskStore, scripts
from taskyard.runtime.store.documents import BeginStepDoc, ReleaseSessionDoc
from taskyard.runtime.store.script_keys import BeginStepKeys, SessionKeys, TaskKeys, script_keys
from taskyard.runtime.store.script_replies import BEGIN_STEP, StepBegun, decode
from taskyard.runtime.store.scripts import SCRIPTS

_LUA = Path(scripts.__file__).with_name("lua")


@pytest.mark.parametrize("name", SCRIPTS)
def test_a_script_reads_only_keys_its_type_names(name: str) -> None:
    # A name its type lacks would read as nil in Lua, silently.
    lines = (_LUA / f"{name}.lua").read_text().splitlines()
    text = "\n".join(line for line in lines if not line.startswith("--"))
    keys_type = script_keys(name)
    fields = set(keys_type._fields) if keys_type else set()
    assert set(re.findall(r"\bKEY\.(\w+)", text)) <= fields
    assert "KEYS" not in text  # never by position


async def test_a_script_refuses_another_scripts_keys(store: TaskStore) -> None:
    doc = ReleaseSessionDoc(store_db=store.db, broker_db=store.broker_db, task_id="t")
    with pytest.raises(TypeError, match="SessionKeys"):
        await store.script("tasks/release_session", TaskKeys("a", "b"), doc)
    assert await store.script("tasks/release_session", SessionKeys("a", "b"), doc) == ""


async def test_begin_steps_answer_decodes_by_name(store: TaskStore) -> None:
    record = await created(store)
    start = await store.begin_step(record.id, 0, "acme", "s1", {"memory": 0})
    assert start is not None and start.current and start.began
    reply = decode(BEGIN_STEP, await _raw_begin(store, record.id))  # running already
    assert isinstance(reply, StepBegun) and reply.memories == [(0, [])] and not reply.began


async def test_begin_steps_answer_leaves_out_the_rollback_mark(store: TaskStore) -> None:
    # The first step marks the session in the task's hash; the step is not shown the mark.
    record = await created(store)
    raw = await _raw_begin(store, record.id)
    task = dict(zip(raw[::2], raw[1::2], strict=True))["task"]
    assert isinstance(task, list)
    assert "id" in task[::2] and not [f for f in task[::2] if f.startswith("before:")]
    assert await store.r.hget(keys.task(record.id), "before:marked") == "1"


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda d: d.pop("epoch"), "epoch"),  # a name missing
        (lambda d: d.update(epochs="0"), "epochs"),  # a name it does not know
        (lambda d: d.update(began="maybe"), "began"),  # a value of another type
        (lambda d: d.update(outcome="started"), "outcome"),  # an outcome it does not know
    ],
)
async def test_an_answer_not_as_its_model_says_fails_loudly(
    store: TaskStore, change: Callable[[dict[object, object]], object], why: str
) -> None:
    record = await created(store)
    raw = await _raw_begin(store, record.id)
    named = dict(zip(raw[::2], raw[1::2], strict=True))
    change(named)
    with pytest.raises(ValidationError, match=why):
        decode(BEGIN_STEP, [part for pair in named.items() for part in pair])


async def _raw_begin(store: TaskStore, task_id: str) -> list[object]:
    """begin_step's answer for step 0 of the task as Redis gives it, before decoding."""
    k = BeginStepKeys(
        task=keys.task(task_id), events=keys.task_events(task_id),
        results=keys.task_tool_results(task_id, -1), epoch=keys.session_epoch("acme", "s1"),
        compaction=keys.session_compaction("acme", "s1"),
        values=keys.session_values("acme", "s1"), paths=keys.session_paths("acme", "s1"),
        memories=(keys.session_memory("acme", "s1", "memory"),),
    )  # fmt: skip
    doc = BeginStepDoc(store_db=store.db, broker_db=store.broker_db, step="0", running="{}",
                       updated_at="0", epoch="0", offsets=[0])  # fmt: skip
    raw: list[object] = await store.script("steps/begin_step", k, doc)
    return raw
