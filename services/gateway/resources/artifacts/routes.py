"""/v1/tasks/{task_id}/artifacts: the files a task's tools made (figures, tables), described by
the task's `artifact` events and served from the artifact store (`taskyard.files.artifacts`),
never from a path. Artifacts expire (`taskyard.runtime.task.RETENTION_S`): the list shows those the
store still keeps."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, status
from fastapi.responses import Response

from services.gateway.deps import OwnedTaskDep, StoreDep
from services.gateway.errors import responses
from services.gateway.resources.artifacts.deps import ArtifactStoreDep
from services.gateway.resources.artifacts.models import ArtifactList, ArtifactPublic
from taskyard.files.artifacts import ARTIFACT_NAME_PATTERN, MEDIA_TYPES, ArtifactBody
from taskyard.runtime.events import EventKind

router = APIRouter(prefix="/v1/tasks", tags=["artifacts"])

_BINARY = {"schema": {"type": "string", "format": "binary"}}
_ARTIFACT = {
    "description": "The artifact's bytes: images inline, HTML and SVG as attachments.",
    "content": {mime: _BINARY for mime in MEDIA_TYPES.values()},
}
_ERRORS = responses(401, 404, why={503: "Redis or the artifact store does not answer."})
# May run script in a browser: never rendered on the API's origin.
_ACTIVE = {"text/html", "image/svg+xml"}


@router.get("/{task_id}/artifacts", response_model=ArtifactList, responses=_ERRORS)
async def list_artifacts(
    record: OwnedTaskDep, store: StoreDep, artifacts: ArtifactStoreDep
) -> ArtifactList:
    """The files the task's tools made that are still kept, in order, each with its URL."""
    kept = {artifact.name for artifact in await artifacts.task_artifacts(record.id)}
    seen: dict[str, ArtifactPublic] = {}
    for event in await store.events(record.id):
        name = event.data.get("name") if event.kind == EventKind.ARTIFACT else None
        if name in kept:
            # A redelivered tool job stores the same artifact again: same name, same bytes.
            seen.setdefault(name, ArtifactPublic.model_validate(event.data))
    return ArtifactList(artifacts=list(seen.values()))


@router.get(
    "/{task_id}/artifacts/{name}",
    response_class=Response,
    responses={200: _ARTIFACT, **_ERRORS},
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
) -> Response:
    """One artifact of the task."""
    body = await artifacts.open(record.id, name)
    if body is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="no such artifact")
    return _served(body)


def _served(body: ArtifactBody) -> Response:
    """The bytes with headers that keep the session's code off the API's origin."""
    disposition = "attachment" if body.media_type in _ACTIVE else "inline"
    headers = {
        "Content-Disposition": f'{disposition}; filename="{body.name}"',  # a name is [a-z0-9.-]
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": "sandbox",
    }
    return Response(body.data, media_type=body.media_type, headers=headers)
