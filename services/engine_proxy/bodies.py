"""Reading a JSON request body exactly as the engine will, or not at all.

The engine (Go) matches JSON keys to fields ignoring case, with Unicode folding (a long s is
an "s"), and keeps the last of repeated keys. A body the proxy and the engine could read
differently is refused: keys must be ASCII, and no object may hold two keys equal but for
case. Past that, both read the same fields.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from services.engine_proxy.errors import Refused

__all__ = ["Wire", "is_zero", "parse_json", "parse_model"]

M = TypeVar("M", bound=BaseModel)


class Wire(BaseModel):
    """A JSON object of the engine's API: fields named as the engine names them, types strict
    (the engine converts nothing either); fields not declared are kept as extras for the
    caller to judge."""

    model_config = ConfigDict(extra="allow", frozen=True, strict=True)

    def extras(self) -> dict[str, Any]:
        return dict(self.__pydantic_extra__ or {})


def parse_json(body: bytes, what: str) -> Any:
    """The body's JSON; `Refused` if it is not JSON or its keys are ambiguous."""
    try:
        return json.loads(body, object_pairs_hook=_unambiguous)
    except _Ambiguous as exc:
        raise Refused(f"the {what} body's key {exc} could be read two ways", 400) from None
    except ValueError:
        raise Refused(f"the {what} body is not JSON", 400) from None


def parse_model(model: type[M], body: bytes, what: str) -> M:
    """The body as `model`, refused with what does not fit."""
    data = parse_json(body, what) if body.strip() else {}
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        said = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'the body'}: {e['msg']}" for e in exc.errors()
        )
        raise Refused(f"the {what} body does not fit: {said}", 400) from None


def is_zero(value: Any) -> bool:
    """Whether a value is null, false, zero or empty: what leaving a field unset means. (An
    object holding only zeros is not: a key can be what it asks for, a volume's path.)"""
    if isinstance(value, dict | list):
        return not value
    return value in (None, False, 0, "")


class _Ambiguous(ValueError):
    pass


def _unambiguous(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: set[str] = set()
    for key, _ in pairs:
        folded = key.casefold()
        if not key.isascii() or folded in seen:
            raise _Ambiguous(repr(key[:40]))
        seen.add(folded)
    return dict(pairs)
