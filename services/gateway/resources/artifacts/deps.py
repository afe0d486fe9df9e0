"""The artifact routes' dependency: the app's artifact store."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from taskyard.files.artifacts import ArtifactStore

__all__ = ["ArtifactStoreDep"]


async def get_artifact_store(request: Request) -> ArtifactStore:
    """The app's artifact store (its lifespan makes and closes it)."""
    store: ArtifactStore = request.app.state.artifacts
    return store


ArtifactStoreDep = Annotated[ArtifactStore, Depends(get_artifact_store)]
