"""What a file is, as the sandbox, the gateway and a task's note to the model describe it."""

from __future__ import annotations

from pydantic import BaseModel, Field

__all__ = ["FileInfo", "FileListing", "human_size"]


class FileInfo(BaseModel):
    """A regular file in a session's working directory."""

    path: str = Field(description="Relative to the working directory (`/work` in the sandbox).")
    size: int = Field(ge=0, description="Bytes.")
    modified: float = Field(description="Last change, Unix time.")


class FileListing(BaseModel):
    """The files of a working directory, by path; `truncated` when more were left out."""

    files: list[FileInfo]
    truncated: bool = False


def human_size(size: int) -> str:
    """Bytes in words: 512 B, 1.2 kB, 3.4 MB."""
    value = float(size)
    for unit in ("B", "kB", "MB"):
        if value < 1000:
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} GB"
