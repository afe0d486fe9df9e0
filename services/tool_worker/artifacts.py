"""A tool result's artifacts leave the message before it is stored: each goes to the artifact
store (`taskyard.files.artifacts`), becomes an `artifact` event on the task's stream (published
before the result, so a follower sees it first) and a download URL in the message, which keeps
only the description. No tool's bytes reach the task's messages.

The worker checks what the action hands it, as it does the kernel's replies: data that is not
base64 or not its stated size drops the artifact, and so does a refusal of the store (a name
that is no artifact's, one too large, a task over its budget); the model's text says why.
"""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from taskyard.agentkit.schema import ActionReturn, AgentMessage, Artifact
from taskyard.files.artifacts import ArtifactRefused, ArtifactStore, artifact_url
from taskyard.runtime.events import EventKind
from taskyard.runtime.jobs import ToolRunJob

__all__ = ["ArtifactKeeper", "Publish"]

log = logging.getLogger("taskyard.tool_worker")

Publish = Callable[[str, EventKind, dict[str, Any]], Awaitable[object]]  # TaskStore.publish


class ArtifactKeeper:
    """Keeps the artifacts of tool results in `store` and announces each with `publish`."""

    def __init__(self, store: ArtifactStore, publish: Publish) -> None:
        self.store = store
        self._publish = publish

    async def keep(self, job: ToolRunJob, message: AgentMessage) -> AgentMessage:
        """The message with its artifacts stored and referenced by URL."""
        ret = message.content
        if not isinstance(ret, ActionReturn) or not ret.artifacts:
            return message
        kept: list[Artifact] = []
        for artifact in ret.artifacts:
            stored, why_not = await self._keep_one(job, artifact)
            if stored is not None:
                kept.append(stored)
            else:
                ret = _noted(ret, f"[{artifact.name[:80]} was not kept: {why_not}]")
        ret = ret.model_copy(update={"artifacts": kept or None})
        return message.model_copy(update={"content": ret})

    async def _keep_one(self, job: ToolRunJob, artifact: Artifact) -> tuple[Artifact | None, str]:
        if artifact.data is None:
            return artifact, ""  # a reference already
        try:
            data = base64.b64decode(artifact.data, validate=True)
        except (binascii.Error, ValueError):
            return None, "its data is not base64"
        if len(data) != artifact.size:
            return None, f"it is {len(data)} bytes, not the {artifact.size} it says"
        try:
            await self.store.put(job.task_id, artifact.name, data)
        except ArtifactRefused as refused:
            return None, refused.reason
        stored = artifact.model_copy(
            update={"data": None, "url": artifact_url(job.task_id, artifact.name)}
        )
        event = {**stored.model_dump(exclude={"data"}), "call_id": job.call.id, "step": job.step}
        await self._publish(job.task_id, EventKind.ARTIFACT, event)
        log.info("artifact %s stored", artifact.name, extra={"task_id": job.task_id})
        return stored, ""


def _noted(ret: ActionReturn, note: str) -> ActionReturn:
    """The result with `note` added to what the model reads (its error text, else its text)."""
    if ret.errmsg:
        return ret.model_copy(update={"errmsg": f"{ret.errmsg}\n{note}"})
    parts = [*(ret.result or []), {"type": "text", "content": note}]
    return ret.model_copy(update={"result": parts})
