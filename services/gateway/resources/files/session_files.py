"""The gateway's side of a session's files. The gateway runs no sandbox: each request is a job
for the tool worker holding the session's sandbox, and a wait for its answer
(`taskyard.files.transfer`). Answers become the API's: a session without a live sandbox and a
missing file 404, a path or file the sandbox refuses 422, a quota 413, a sandbox that cannot
serve 503, no tool worker in time 504."""

from __future__ import annotations

import time
from typing import Literal

from celery import Celery
from fastapi import HTTPException, status

from services.gateway.errors import issue
from taskyard.files.info import FileInfo, FileListing
from taskyard.files.transfer import FilesReply, FileTransfer
from taskyard.plumbing.settings import FileSettings
from taskyard.runtime.jobs import SessionFilesJob, envelope
from taskyard.runtime.store import TaskStore

__all__ = ["SessionFiles"]

_NOT_FOUND = {"no_session", "not_found", "not_a_file"}  # of a read: nothing there to serve
FileOp = Literal["write", "read", "list"]


class SessionFiles:
    """Upload, list and download a session's files through its tool worker (the one holding
    its interpreter, where one does: the store's push routes the request there)."""

    def __init__(
        self,
        transfer: FileTransfer,
        celery: Celery,
        store: TaskStore,
        settings: FileSettings,
    ) -> None:
        self.transfer = transfer
        self.celery = celery
        self.store = store
        self.timeout_s = settings.files_timeout_s
        self.session_max_bytes = settings.files_session_max_bytes

    async def upload(self, tenant: str, session_id: str, path: str, data: bytes) -> FileInfo:
        job = self._job(tenant, session_id, "write", path)
        quota = self.session_max_bytes
        if not await self.transfer.stage(job.request_id, tenant, session_id, data, quota):
            raise HTTPException(
                status.HTTP_413_CONTENT_TOO_LARGE,
                detail=f"uploads to this session under way would pass its {quota} bytes "
                "(TASKYARD_FILES_SESSION_MAX_BYTES); wait for them to finish",
            )
        reply, _ = await self._ask(job)
        assert reply.file is not None
        return reply.file

    async def listing(self, tenant: str, session_id: str) -> FileListing:
        reply, _ = await self._ask(self._job(tenant, session_id, "list"))
        return reply.listing or FileListing(files=[])

    async def download(self, tenant: str, session_id: str, path: str) -> bytes:
        _, data = await self._ask(self._job(tenant, session_id, "read", path))
        return data

    async def attached(self, tenant: str, session_id: str, paths: list[str]) -> list[FileInfo]:
        """The files a task names, as the session's sandbox has them; 422 for one it lacks."""
        if not paths:
            return []
        try:
            listing = await self.listing(tenant, session_id)
        except HTTPException as exc:
            if exc.status_code != status.HTTP_404_NOT_FOUND:
                raise
            listing = FileListing(files=[])
        have = {f.path: f for f in listing.files}
        missing = [
            issue(["body", "files", n], f"no file {path!r} in session {session_id!r}; upload it "
                  "first (POST /v1/sessions/{session_id}/files)")
            for n, path in enumerate(paths) if path not in have
        ]  # fmt: skip
        if missing:
            raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, detail=missing)
        return [have[path] for path in paths]

    def _job(
        self, tenant: str, session_id: str, op: FileOp, path: str | None = None
    ) -> SessionFilesJob:
        return SessionFilesJob(
            tenant=tenant, session_id=session_id, op=op, path=path,
            expires_at=time.time() + self.timeout_s,
        )  # fmt: skip

    async def _ask(self, job: SessionFilesJob) -> tuple[FilesReply, bytes]:
        await self.store.push([envelope(self.celery, job)])
        answer = await self.transfer.wait(job.request_id, self.timeout_s)
        if answer is None:
            raise HTTPException(
                status.HTTP_504_GATEWAY_TIMEOUT,
                detail=f"no tool worker answered within {self.timeout_s:g} s "
                "(TASKYARD_FILES_TIMEOUT_S): is one serving the IPythonInterpreter queue?",
            )
        reply, data = answer
        if reply.outcome != "ok":
            raise _refused(job, reply)
        return reply, data


def _refused(job: SessionFilesJob, reply: FilesReply) -> HTTPException:
    """The API's answer to a refusal."""
    outcome, detail = reply.outcome, reply.detail
    if job.op != "write" and outcome in _NOT_FOUND:
        return HTTPException(status.HTTP_404_NOT_FOUND, detail=detail)
    if outcome in ("quota", "no_space", "too_large") and job.op == "write":
        return HTTPException(status.HTTP_413_CONTENT_TOO_LARGE, detail=detail)
    if outcome == "unavailable":
        return HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, detail=detail)
    where = ["body", "path"] if job.op == "write" else ["path", "path"]
    return HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, detail=[issue(where, detail)])
