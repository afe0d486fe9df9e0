"""The artifact store: where tool workers keep the files a task's tools made and gateways read
them from. No service reads another's disk: the bytes cross through the store (the store's
Redis, or an S3-compatible object store), never through a shared path.

Every backend keeps the same rules (tests/files/test_artifact_store.py runs them on each):

- `put` keeps an artifact whole or refuses it (`ArtifactRefused`, its reason in words the
  model reads): a name that is no artifact's, more than `artifact_max_bytes`, or more than the
  task's `task_max_bytes` with what the task keeps already. The same name again is the same
  bytes (names are hashes of them): kept and counted once.
- `open` gives an artifact's bytes with their size and media type, or None.
- `task_artifacts` lists what a task keeps now.
- Artifacts expire with the task's other traces (`taskyard.runtime.task.RETENTION_S`); `expiry` says
how
  the backend does it, or that nothing will.

The backend's own failures leave as `ArtifactStoreUnavailable`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from taskyard.errors import TaskyardError
from taskyard.files.artifacts.names import is_artifact_name, is_task_id, media_type
from taskyard.files.info import human_size
from taskyard.plumbing.keys import RETENTION_S
from taskyard.plumbing.settings import ArtifactSettings

__all__ = [
    "ArtifactBody",
    "ArtifactError",
    "ArtifactLimits",
    "ArtifactRefused",
    "ArtifactStore",
    "ArtifactStoreUnavailable",
    "Expiry",
    "StoredArtifact",
    "check_put",
    "duration",
    "over_task_budget",
]


class ArtifactError(TaskyardError):
    """Root of the artifact store's errors."""


class ArtifactRefused(ArtifactError, ValueError):
    """An artifact the store does not keep; `reason` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ArtifactStoreUnavailable(ArtifactError):
    """The backend did not answer, or answered with an error of its own."""


@dataclass(frozen=True, slots=True)
class StoredArtifact:
    """An artifact a task keeps: its name and size."""

    name: str
    size: int

    @property
    def media_type(self) -> str:
        return media_type(self.name)


@dataclass(frozen=True, slots=True)
class ArtifactBody:
    """An artifact's bytes, to serve."""

    name: str
    data: bytes

    @property
    def size(self) -> int:
        return len(self.data)

    @property
    def media_type(self) -> str:
        return media_type(self.name)


@dataclass(frozen=True, slots=True)
class Expiry:
    """How a backend expires artifacts: after `after_s` (None: never), and how, in words."""

    after_s: float | None
    how: str


@dataclass(frozen=True, slots=True)
class ArtifactLimits:
    """The bounds every backend keeps."""

    artifact_max_bytes: int
    task_max_bytes: int
    retention_s: float = RETENTION_S

    @classmethod
    def from_settings(cls, settings: ArtifactSettings) -> ArtifactLimits:
        return cls(settings.artifacts_max_bytes, settings.artifacts_task_max_bytes)


class ArtifactStore(Protocol):
    """What the tool worker (`put`) and the gateway (`open`, `task_artifacts`) need."""

    async def put(self, task_id: str, name: str, data: bytes) -> None:
        """Keep `data` as the task's artifact `name`, or raise `ArtifactRefused`."""
        ...

    async def open(self, task_id: str, name: str) -> ArtifactBody | None:
        """The artifact, or None if the task keeps none by that name."""
        ...

    async def task_artifacts(self, task_id: str) -> list[StoredArtifact]:
        """What the task keeps now, by name."""
        ...

    async def expiry(self) -> Expiry:
        """How (and whether) the artifacts expire, as configured now."""
        ...

    async def close(self) -> None: ...


def check_put(task_id: str, name: str, size: int, limits: ArtifactLimits) -> None:
    """What every backend refuses before it looks at what the task keeps."""
    if not is_task_id(task_id):
        raise ArtifactRefused(f"not a task id: {task_id[:80]!r}")
    if not is_artifact_name(name):
        raise ArtifactRefused(f"not an artifact name: {name[:80]!r}")
    if size > limits.artifact_max_bytes:
        most = human_size(limits.artifact_max_bytes)
        raise ArtifactRefused(
            f"it is {human_size(size)}, over the {most} one artifact may be (ARTIFACTS_MAX_BYTES)"
        )


def over_task_budget(limits: ArtifactLimits) -> ArtifactRefused:
    """The refusal of an artifact that would take the task past its budget."""
    limit = human_size(limits.task_max_bytes)
    return ArtifactRefused(f"the task's artifacts would pass {limit} (ARTIFACTS_TASK_MAX_BYTES)")


def duration(seconds: float) -> str:
    """A retention in words: ``7 days``, ``90 s``."""
    days = seconds / 86400
    if days < 1:
        return f"{seconds:g} s"
    return f"{days:g} day" if days == 1 else f"{days:g} days"
