"""A tool result's artifacts leave the message before it is stored: each becomes a file of the
task (`shared.files.artifacts`), an `artifact` event on the task's stream (published before the
result, so a follower sees it first) and a download URL in the message, which keeps only the
description. Nothing a tool made reaches Redis but that description.

The worker checks what the action hands it, as it does the kernel's replies: a name that is
not an artifact name, data that is not base64 or not its stated size, or a task over its
artifact budget drop the artifact, and the model's text says it was not kept.
"""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import Callable
from typing import Any

from shared.events import EventKind
from shared.files.artifacts import ArtifactStore, artifact_url
from shared.files.info import human_size
from shared.jobs import ToolRunJob
from shared.schema import ActionReturn, AgentMessage, Artifact

__all__ = ["ArtifactKeeper", "Publish"]

log = logging.getLogger("taskyard.tool_worker")

Publish = Callable[[str, EventKind, dict[str, Any]], object]  # TaskStore.publish, run sync


class ArtifactKeeper:
    """Stores the artifacts of tool results in `store`, at most `task_max_bytes` per task."""

    def __init__(self, store: ArtifactStore, publish: Publish, task_max_bytes: int) -> None:
        self.store = store
        self._publish = publish
        self._task_max = task_max_bytes

    def keep(self, job: ToolRunJob, message: AgentMessage) -> AgentMessage:
        """The message with its artifacts stored and referenced by URL."""
        ret = message.content
        if not isinstance(ret, ActionReturn) or not ret.artifacts:
            return message
        kept: list[Artifact] = []
        for artifact in ret.artifacts:
            stored, why_not = self._keep_one(job, artifact)
            if stored is not None:
                kept.append(stored)
            else:
                ret = _noted(ret, f"[{artifact.name[:80]} was not kept: {why_not}]")
        ret = ret.model_copy(update={"artifacts": kept or None})
        return message.model_copy(update={"content": ret})

    def _keep_one(self, job: ToolRunJob, artifact: Artifact) -> tuple[Artifact | None, str]:
        if artifact.data is None:
            return artifact, ""  # a reference already
        try:
            data = base64.b64decode(artifact.data, validate=True)
        except (binascii.Error, ValueError):
            return None, "its data is not base64"
        if len(data) != artifact.size:
            return None, f"it is {len(data)} bytes, not the {artifact.size} it says"
        used = self.store.task_bytes(job.task_id)
        if used + len(data) > self._task_max:
            limit = human_size(self._task_max)
            return None, f"the task's artifacts would pass {limit} (ARTIFACTS_TASK_MAX_BYTES)"
        try:
            self.store.put(job.task_id, artifact.name, data)
        except ValueError as exc:
            return None, str(exc)
        stored = artifact.model_copy(
            update={"data": None, "url": artifact_url(job.task_id, artifact.name)}
        )
        event = {**stored.model_dump(exclude={"data"}), "call_id": job.call.id, "step": job.step}
        self._publish(job.task_id, EventKind.ARTIFACT, event)
        log.info("artifact %s stored", artifact.name, extra={"task_id": job.task_id})
        return stored, ""


def _noted(ret: ActionReturn, note: str) -> ActionReturn:
    """The result with `note` added to what the model reads (its error text, else its text)."""
    if ret.errmsg:
        return ret.model_copy(update={"errmsg": f"{ret.errmsg}\n{note}"})
    parts = [*(ret.result or []), {"type": "text", "content": note}]
    return ret.model_copy(update={"result": parts})
