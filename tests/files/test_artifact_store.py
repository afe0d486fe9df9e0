"""The artifact store: files of tasks under one directory, named so no name is a path."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from shared.files.artifacts import ArtifactStore, artifact_name, artifact_url
from shared.task import new_task_id


def test_an_artifact_is_kept_under_its_task(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path / "artifacts")  # made on first write
    task = new_task_id()
    name = artifact_name("figure", "image/png", b"png bytes")
    assert name.startswith("figure-") and name.endswith(".png")
    assert name == artifact_name("figure", "image/png", b"png bytes")  # the same bytes: the same
    store.put(task, name, b"png bytes")
    assert store.path(task, name) == tmp_path / "artifacts" / task / name
    assert store.path(task, name).read_bytes() == b"png bytes"  # type: ignore[union-attr]
    assert store.task_bytes(task) == 9 and store.task_bytes(new_task_id()) == 0
    assert artifact_url(task, name) == f"/v1/tasks/{task}/artifacts/{name}"
    assert [p.name for p in (tmp_path / "artifacts" / task).iterdir()] == [name]  # no leftovers
    assert (
        tmp_path / "artifacts" / task / name
    ).stat().st_mode & 0o777 == 0o644  # the gateway reads it


@pytest.mark.parametrize("name", ["../x.png", "figure-abc.png", "figure-0123456789ab.exe", ""])
def test_only_artifact_names_are_written_or_served(tmp_path: Path, name: str) -> None:
    store = ArtifactStore(tmp_path)
    with pytest.raises(ValueError):
        store.put(new_task_id(), name, b"x")
    assert store.path(new_task_id(), name) is None
    with pytest.raises(ValueError):
        store.put("../../etc", artifact_name("image", "image/png", b"x"), b"x")


def test_no_name_for_an_unknown_type() -> None:
    with pytest.raises(ValueError):
        artifact_name("image", "application/x-evil", b"x")


def test_old_tasks_artifacts_are_removed(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path)
    old, new = new_task_id(), new_task_id()
    for task in (old, new):
        store.put(task, artifact_name("image", "image/png", task.encode()), b"x")
    week_ago = time.time() - 8 * 24 * 3600
    os.utime(tmp_path / old, (week_ago, week_ago))
    (tmp_path / "not-a-task").mkdir()  # what is not a task's is left alone
    assert store.remove_older_than(7 * 24 * 3600) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([new, "not-a-task"])
    assert ArtifactStore(tmp_path / "none").remove_older_than(1) == 0
