"""Artifacts: the files a task's tools made (a cell's figures and tables), kept in an artifact
store that tool workers write and gateways read; only their descriptions go through the
task's event stream (its `artifact` events).

- `names`: an artifact's name (a hash of its bytes), its media type, its URL;
- `store`: the `ArtifactStore` protocol every backend keeps, its limits and errors;
- `redis_store`, `s3_store`: the backends, one of which `TASKYARD_ARTIFACTS_BACKEND` names.
"""

from __future__ import annotations

from collections.abc import Callable

from taskyard.files.artifacts.names import (
    ARTIFACT_NAME_PATTERN,
    EXTENSIONS,
    MEDIA_TYPES,
    artifact_name,
    artifact_url,
    is_artifact_name,
    media_type,
)
from taskyard.files.artifacts.redis_store import RedisArtifactStore
from taskyard.files.artifacts.store import (
    ArtifactBody,
    ArtifactError,
    ArtifactLimits,
    ArtifactRefused,
    ArtifactStore,
    ArtifactStoreUnavailable,
    Expiry,
    StoredArtifact,
)
from taskyard.plumbing.settings import ArtifactSettings

__all__ = [
    "ARTIFACT_NAME_PATTERN",
    "BACKENDS",
    "EXTENSIONS",
    "MEDIA_TYPES",
    "ArtifactBody",
    "ArtifactError",
    "ArtifactLimits",
    "ArtifactRefused",
    "ArtifactStore",
    "ArtifactStoreUnavailable",
    "Expiry",
    "StoredArtifact",
    "artifact_name",
    "artifact_url",
    "is_artifact_name",
    "make_artifact_store",
    "media_type",
]


def _redis(settings: ArtifactSettings) -> ArtifactStore:
    limits = ArtifactLimits.from_settings(settings)
    return RedisArtifactStore.from_url(
        settings.redis_url, limits, settings.redis_max_connections, settings.sentinel
    )


def _s3(settings: ArtifactSettings) -> ArtifactStore:
    # Imported when chosen: boto3 comes with the `service` extra, not the agent library.
    from taskyard.files.artifacts.s3_store import S3ArtifactStore

    return S3ArtifactStore.from_settings(settings)


# settings.artifacts_backend names one of these.
BACKENDS: dict[str, Callable[[ArtifactSettings], ArtifactStore]] = {
    "redis": _redis,
    "s3": _s3,
}


def make_artifact_store(settings: ArtifactSettings) -> ArtifactStore:
    """The store `settings.artifacts_backend` names. Make it on the event loop that uses it
    (the Redis backend's connections belong to that loop)."""
    try:
        backend = BACKENDS[settings.artifacts_backend]
    except KeyError:
        known = ", ".join(sorted(BACKENDS))
        name = settings.artifacts_backend
        raise ValueError(f"TASKYARD_ARTIFACTS_BACKEND: unknown {name!r}; known: {known}") from None
    return backend(settings)
