"""API models of a session's files and a task's artifacts, one per direction."""

from __future__ import annotations

from pydantic import BaseModel, Field

from taskyard.files.info import FileInfo

__all__ = ["ArtifactList", "ArtifactPublic", "SessionFile", "SessionFileList"]


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


class ArtifactPublic(BaseModel):
    """A file a task's tool made (a figure, a table), kept with the task."""

    name: str
    mime: str
    kind: str = Field(description='What made it: "figure", "table", "image" or "html".')
    size: int = Field(description="Bytes.")
    width: int | None = Field(default=None, description="Pixels, for PNG and JPEG images.")
    height: int | None = Field(default=None, description="Pixels, for PNG and JPEG images.")
    url: str = Field(description="Where to download it (`GET`, with the task's API key).")
    call_id: str = Field(description="The tool call that made it.")
    step: int = Field(description="The agent step of that call.")


class ArtifactList(BaseModel):
    """A task's artifacts in the order its tools made them."""

    artifacts: list[ArtifactPublic]
