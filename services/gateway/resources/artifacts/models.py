"""API models of a task's artifacts."""

from __future__ import annotations

from pydantic import BaseModel, Field

__all__ = ["ArtifactList", "ArtifactPublic"]


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
