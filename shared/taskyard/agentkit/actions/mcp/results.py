"""An MCP tool's result as taskyard's: its content blocks become the text the model reads, and
its images the task's artifacts (kept by the tool worker, as a cell's figures are).

- text: as it is; an embedded text resource: its URI, then its text;
- an image (a block, or an embedded blob resource) of a type artifacts take (PNG, JPEG, SVG):
  an artifact, which the model reads as one line naming it; another type: a line saying so;
- audio, other blobs, resource links: a line naming what it is (the model cannot read them);
- structured content, when no text came with it: its JSON.

Everything the model reads is cut at `max_chars`. An `isError` result is the tool's error, so
the model can correct its call; so is a result whose content is not what the SDK's types say.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable

import mcp.types as types

from taskyard.agentkit.schema import ActionReturn, ActionStatusCode, Artifact
from taskyard.files.artifacts import EXTENSIONS, artifact_name
from taskyard.files.info import human_size
from taskyard.sandbox.outputs import image_size

__all__ = ["action_return"]


def action_return(
    call_name: str, arguments: dict[str, object], result: types.CallToolResult, max_chars: int
) -> ActionReturn:
    """The call's `ActionReturn`: its text (or error) and its artifacts."""
    parts: list[str] = []
    artifacts: list[Artifact] = []
    for block in result.content:
        text, artifact = _block(block)
        parts.append(text)
        if artifact is not None:
            artifacts.append(artifact)
    if result.structured_content is not None and not _has_text(result.content):
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    text = _capped("\n".join(parts) or "(no output)", max_chars)
    ret = ActionReturn(type=call_name, args=arguments, artifacts=artifacts or None)
    if result.is_error:
        ret.errmsg, ret.state = text, ActionStatusCode.API_ERROR
    else:
        ret.result = [{"type": "text", "content": text}]
    return ret


def _block(block: types.ContentBlock) -> tuple[str, Artifact | None]:
    if isinstance(block, types.TextContent):
        return block.text, None
    if isinstance(block, types.ImageContent) and block.mime_type.startswith("image/"):
        return _image(block.mime_type, block.data, "image")
    if isinstance(block, types.EmbeddedResource):
        return _resource(block.resource)
    if isinstance(block, types.ResourceLink):
        return f"[resource link: {block.uri}{f' ({block.name})' if block.name else ''}]", None
    if isinstance(block, types.AudioContent | types.ImageContent):
        return f"[{block.type} ({block.mime_type}), {_size(block.data)}: not shown]", None
    return f"[{getattr(block, 'type', 'content')}: not shown]", None


def _resource(
    resource: types.TextResourceContents | types.BlobResourceContents,
) -> tuple[str, Artifact | None]:
    if isinstance(resource, types.TextResourceContents):
        return f"[resource {resource.uri}]\n{resource.text}", None
    mime = resource.mime_type or "application/octet-stream"
    if mime in EXTENSIONS:
        text, artifact = _image(mime, resource.blob, "resource")
        return f"[resource {resource.uri}] {text}", artifact
    return f"[resource {resource.uri} ({mime}), {_size(resource.blob)}: not shown]", None


def _image(mime: str, data: str, kind: str) -> tuple[str, Artifact | None]:
    """An image block as an artifact, where artifacts take its type."""
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return f"[{mime} data that is not base64: not shown]", None
    if mime not in EXTENSIONS:
        return f"[{kind} ({mime}), {human_size(len(raw))}: not shown]", None
    size = image_size(mime, raw)
    artifact = Artifact(
        name=artifact_name(kind, mime, raw), mime=mime, kind=kind, size=len(raw),
        width=size[0] if size else None, height=size[1] if size else None, data=data,
    )  # fmt: skip
    return artifact.describe(), artifact


def _size(data: str) -> str:
    return human_size(len(data) * 3 // 4)  # base64's length, as bytes


def _has_text(blocks: Iterable[types.ContentBlock]) -> bool:
    return any(isinstance(block, types.TextContent) for block in blocks)


def _capped(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[... {len(text) - limit} more characters not shown]"
