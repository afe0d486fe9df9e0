"""Tool APIs: a typed method becomes a tool the model can call, described by its signature.

The arguments model (pydantic) is built from the type hints; descriptions come from the
docstring's arguments (Google, NumPy or Sphinx style) or from ``Annotated[type, "description"]``.
The same model validates the model's arguments and gives the JSON schema, so the two cannot
drift apart.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar, get_args, get_origin, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, create_model

from taskyard.agentkit.actions.docstrings import parse_docstring

__all__ = ["SESSION_PARAMETER", "ToolApi", "describe_api", "is_tool_api", "tool_api"]

F = TypeVar("F", bound=Callable[..., Any])

# A method that declares this parameter gets the caller's session key; the model never sees it.
SESSION_PARAMETER = "session_id"
_MARK = "__tool_api__"


def tool_api(func: F) -> F:
    """Mark a method of a `BaseAction` as one API of a toolkit (``Toolkit.method``)."""
    setattr(func, _MARK, True)
    return func


def is_tool_api(func: object) -> bool:
    return callable(func) and getattr(func, _MARK, False)


@dataclass(frozen=True)
class ToolApi:
    """One callable API: its method, what it does, and the model of its arguments."""

    method: str
    description: str
    arguments: type[BaseModel]
    wants_session: bool

    def json_schema(self) -> dict[str, Any]:
        """The arguments as a JSON schema object, without pydantic's generated titles."""
        schema = self.arguments.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        return schema


def describe_api(owner: str, func: Callable[..., Any]) -> ToolApi:
    """Describe `func` (a method of the action `owner`) from its signature and docstring."""
    doc = parse_docstring(func.__doc__)
    hints = get_type_hints(func, include_extras=True)
    params = [p for p in inspect.signature(func).parameters.values() if p.name != "self"]
    fields = {
        p.name: _field(p, hints.get(p.name, str), doc.args.get(p.name, ""))
        for p in params
        if p.name != SESSION_PARAMETER
    }
    model = create_model(  # type: ignore[call-overload]
        f"{owner}_{func.__name__}_arguments",
        __config__=ConfigDict(extra="forbid"),
        **fields,
    )
    wants_session = any(p.name == SESSION_PARAMETER for p in params)
    return ToolApi(func.__name__, doc.summary, model, wants_session)


def _field(param: inspect.Parameter, hint: Any, doc: str) -> tuple[Any, Any]:
    if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
        raise TypeError(f"tool API parameter *{param.name} cannot be described to a model")
    if get_origin(hint) is Annotated:
        hint, *extras = get_args(hint)
        doc = next((e for e in extras if isinstance(e, str)), doc)
    default = ... if param.default is inspect.Parameter.empty else param.default
    return hint, Field(default, description=doc or None)
