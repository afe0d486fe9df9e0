"""/v1/sessions/{session_id}/files: put a file into the session's sandbox, list the working
directory, download a file. Each goes to the tool worker holding the sandbox
(`session_files.py`); what is listed and served is what the sandbox holds, files its code
wrote included, for as long as the sandbox lives."""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, File, Form, HTTPException, Path, UploadFile, status
from fastapi.responses import Response

from services.gateway.admission import LargeBodies
from services.gateway.deps import SettingsDep, TenantDep
from services.gateway.errors import issue, responses
from services.gateway.resources.files.deps import NewSessionIdDep, SessionFilesDep, SessionIdDep
from services.gateway.resources.files.models import SessionFile, SessionFileList
from taskyard.plumbing.settings import FileSettings
from taskyard.sandbox.kernel.files import MAX_PATH_CHARS, path_parts

router = APIRouter(prefix="/v1/sessions", tags=["files"])

_MULTIPART_SLACK = 64 * 1024  # the form's own bytes around the file
_NO_SESSION = "No live sandbox holds this session (none yet, or reaped with its files)."
_FILE = {
    "description": "The file's bytes.",
    "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
}


@router.post(
    "/{session_id}/files",
    status_code=status.HTTP_201_CREATED,
    response_model=SessionFile,
    responses=responses(
        400, 401, 413, 422, 503, 504,
        why={400: "The multipart body cannot be parsed.",
             413: "The file, or the session's files with it, over their limit.",
             503: "The session's sandbox cannot start or take the file."},
    ),
)  # fmt: skip
async def upload_file(
    session_id: NewSessionIdDep,
    tenant: TenantDep,
    files: SessionFilesDep,
    settings: SettingsDep,
    file: Annotated[UploadFile, File(description="The file's content.")],
    path: Annotated[
        str,
        Form(
            max_length=MAX_PATH_CHARS,
            description="Where to put it, relative to the working directory (`data/in.csv`); "
            "by default the upload's file name. Its directories are made; a file there is "
            "replaced.",
        ),
    ] = "",
) -> SessionFile:
    """Put a file into the session's sandbox (starting the sandbox if the session has none),
    for the session's code and tasks to use."""
    target = path or PurePosixPath(file.filename or "").name
    _check_path(target, ["body", "path"])
    limit = settings.files_max_bytes
    data = await file.read(limit + 1)
    if len(data) > limit:
        detail = f"the file is over {limit} bytes (TASKYARD_FILES_MAX_BYTES)"
        raise HTTPException(status.HTTP_413_CONTENT_TOO_LARGE, detail=detail)
    return SessionFile.of(await files.upload(tenant, session_id, target, data))


@router.get(
    "/{session_id}/files",
    response_model=SessionFileList,
    responses=responses(401, 404, 503, 504, why={404: _NO_SESSION}),
)
async def list_files(
    session_id: SessionIdDep, tenant: TenantDep, files: SessionFilesDep
) -> SessionFileList:
    """The regular files in the session's working directory, uploaded or written by its code
    (symbolic links are not followed; at most 1000)."""
    listing = await files.listing(tenant, session_id)
    return SessionFileList(
        files=[SessionFile.of(f) for f in listing.files], truncated=listing.truncated
    )


@router.get(
    "/{session_id}/files/{path:path}",
    response_class=Response,
    responses={
        200: _FILE,
        **responses(
            401, 404, 422, 503, 504,
            why={404: "No such regular file, or no live sandbox holds this session.",
                 422: "The path leaves the working directory, or the file is over "
                 "TASKYARD_FILES_MAX_BYTES."},
        ),
    },
)  # fmt: skip
async def download_file(
    session_id: SessionIdDep,
    tenant: TenantDep,
    files: SessionFilesDep,
    path: Annotated[str, Path(description="Relative to the working directory.")],
) -> Response:
    """A file of the session's working directory, as an attachment."""
    _check_path(path, ["path", "path"])
    data = await files.download(tenant, session_id, path)
    return Response(data, media_type="application/octet-stream", headers=_attachment(path))


def _check_path(path: str, where: list[str | int]) -> None:
    try:
        path_parts(path)
    except ValueError as exc:
        detail = [issue(where, f"{exc} (got {path[:100]!r})")]
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, detail=detail) from None


def _attachment(path: str) -> dict[str, str]:
    """Headers that make a browser save the file, never render it on the API's origin."""
    name = PurePosixPath(path).name
    plain = name.encode("ascii", "replace").decode().replace('"', "_").replace("\\", "_")
    return {
        "Content-Disposition": f"attachment; filename=\"{plain}\"; filename*=UTF-8''{quote(name)}",
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": "sandbox",
    }


def upload_limit(settings: FileSettings) -> LargeBodies:
    """The body an upload may send, checked before it is read (every other route keeps the
    gateway's small limit): the largest file and the form around it."""
    limit = settings.files_max_bytes
    return LargeBodies(
        "POST",
        re.compile(r"/v1/sessions/[^/]+/files"),
        limit + _MULTIPART_SLACK,
        f"an upload's body over {limit + _MULTIPART_SLACK} bytes: a file is at most {limit} "
        "bytes (TASKYARD_FILES_MAX_BYTES)",
    )
