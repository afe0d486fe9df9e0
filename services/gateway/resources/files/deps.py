"""Typed dependencies of the file routes: the session-files client and a session id taken
from the path."""

from __future__ import annotations

import re
from typing import Annotated

from fastapi import Depends, HTTPException, Path, Request, status

from services.gateway.deps import CLIENT_NAME, CeleryDep, SettingsDep, StoreDep
from services.gateway.errors import issue
from services.gateway.resources.files.session_files import SessionFiles
from taskyard.files.transfer import FileTransfer
from taskyard.plumbing.redis_clients import async_client
from taskyard.runtime.task import SESSION_ID_MAX, SESSION_ID_PATTERN

__all__ = ["NewSessionIdDep", "SessionFilesDep", "SessionIdDep"]

_FILE_REQUESTS = 64  # connections for answers awaited at once (each waits on one)
_SESSION_ID = re.compile(SESSION_ID_PATTERN)
_SessionIdPath = Path(
    description="A session id, as tasks name it (`session_id`); sessions are per API key.",
    json_schema_extra={"pattern": SESSION_ID_PATTERN, "maxLength": SESSION_ID_MAX},
)


async def get_session_files(
    request: Request, settings: SettingsDep, celery: CeleryDep, store: StoreDep
) -> SessionFiles:
    """The app's session-files client: its own connections, which do not decode (bytes) and
    may each wait a while for an answer."""
    state = request.app.state
    if state.transfer is None:
        client = async_client(
            settings.redis_url, settings.sentinel, max_connections=_FILE_REQUESTS,
            pool_timeout=settings.files_timeout_s, client_name=f"{CLIENT_NAME}-files",
        )  # fmt: skip
        state.transfer = FileTransfer(client, settings.files_timeout_s)
    return SessionFiles(state.transfer, celery, store, settings)


def _valid(session_id: str) -> bool:
    return len(session_id) <= SESSION_ID_MAX and _SESSION_ID.fullmatch(session_id) is not None


async def read_session_id(session_id: Annotated[str, _SessionIdPath]) -> str:
    """A session to read: an id no session can have is the same 404 as an unknown one."""
    if not _valid(session_id):
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="no such session")
    return session_id


async def write_session_id(session_id: Annotated[str, _SessionIdPath]) -> str:
    """A session to write to (an upload starts it): an id no session can have is a 422."""
    if not _valid(session_id):
        msg = f"a session id is 1 to {SESSION_ID_MAX} of A-Z a-z 0-9 _ . : -"
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT, detail=[issue(["path", "session_id"], msg)]
        )
    return session_id


SessionFilesDep = Annotated[SessionFiles, Depends(get_session_files)]
SessionIdDep = Annotated[str, Depends(read_session_id)]
NewSessionIdDep = Annotated[str, Depends(write_session_id)]
