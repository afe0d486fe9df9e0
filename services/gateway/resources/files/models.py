"""API models of a session's files, one per direction."""

from __future__ import annotations

from pydantic import BaseModel, Field

from taskyard.files.info import FileInfo

__all__ = ["SessionFile", "SessionFileList"]


class SessionFile(BaseModel):
    """A regular file in the session's working directory (`/work` in its sandbox)."""

    path: str = Field(description="Relative to the working directory.")
    size: int = Field(description="Bytes.")
    modified: float = Field(description="Last change, Unix time.")

    @classmethod
    def of(cls, info: FileInfo) -> SessionFile:
        return cls(path=info.path, size=info.size, modified=info.modified)


class SessionFileList(BaseModel):
    """The working directory's files, by path; `truncated` when more were left out."""

    files: list[SessionFile]
    truncated: bool
