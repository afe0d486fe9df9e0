"""/v1/tasks/{task_id}/artifacts: the files a task's tools made (figures, tables), listed from
the task's `artifact` events and served from the artifact store (`shared.files.artifacts`)."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, status
from fastapi.responses import FileResponse

from services.gateway.deps import OwnedTaskDep, StoreDep
from services.gateway.errors import responses
from services.gateway.file_deps import ArtifactStoreDep
from services.gateway.file_models import ArtifactList, ArtifactPublic
from shared.events import EventKind
from shared.files.artifacts import ARTIFACT_NAME_PATTERN, MEDIA_TYPES

router = APIRouter(prefix="/v1/tasks", tags=["artifacts"])

_BINARY = {"schema": {"type": "string", "format": "binary"}}
_ARTIFACT = {
    "description": "The artifact's bytes: images inline, HTML and SVG as attachments.",
    "content": {mime: _BINARY for mime in MEDIA_TYPES.values()},
}
_ACTIVE = {".html", ".svg"}  # may run script in a browser: never rendered on the API's origin


@router.get("/{task_id}/artifacts", response_model=ArtifactList, responses=responses(401, 404))
async def list_artifacts(record: OwnedTaskDep, store: StoreDep) -> ArtifactList:
    """The files the task's tools made, in order, each with its download URL."""
    seen: dict[str, ArtifactPublic] = {}
    for event in await store.events(record.id):
        if event.kind == EventKind.ARTIFACT:
            # A redelivered tool job stores the same artifact again: same name, same bytes.
            seen.setdefault(event.data["name"], ArtifactPublic.model_validate(event.data))
    return ArtifactList(artifacts=list(seen.values()))


@router.get(
    "/{task_id}/artifacts/{name}",
    response_class=FileResponse,
    responses={200: _ARTIFACT, **responses(401, 404)},
)
async def download_artifact(
    record: OwnedTaskDep,
    artifacts: ArtifactStoreDep,
    name: Annotated[
        str,
        Path(
            description="The artifact's name.", json_schema_extra={"pattern": ARTIFACT_NAME_PATTERN}
        ),
    ],
) -> FileResponse:
    """One artifact of the task."""
    path = artifacts.path(record.id, name)
    if path is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="no such artifact")
    suffix = PurePosixPath(name).suffix
    disposition = "attachment" if suffix in _ACTIVE else "inline"
    return FileResponse(
        path, media_type=MEDIA_TYPES[suffix], filename=name, content_disposition_type=disposition,
        headers={"X-Content-Type-Options": "nosniff", "Content-Security-Policy": "sandbox"},
    )  # fmt: skip
