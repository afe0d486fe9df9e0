"""The configuration table: every setting of the given settings classes as Markdown, one
table per area (the class that declares the field), with the services that read it.

The README's "Configuration" section is this output (`scripts/settings_table.py` writes it; a
test keeps them equal), so a setting's docs are its field's docstring."""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping
from typing import Any, get_args

from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from taskyard.plumbing.settings.checks import env_name

__all__ = ["areas_of", "markdown"]

_HEADER = "| Variable | Type | Default | Read by | What it is |\n| --- | --- | --- | --- | --- |"


def areas_of(classes: Mapping[str, type[BaseModel]]) -> dict[type[BaseModel], list[str]]:
    """Each class that declares a field of `classes`, with its fields, in source order (the
    shared areas first); a field declared twice (the proxy's own `redis_url`) counts where it
    is met first."""
    found: dict[type[BaseModel], list[str]] = {}
    seen: set[str] = set()
    for cls in classes.values():
        for base in reversed(cls.__mro__):
            own = [n for n in vars(base).get("__annotations__", {}) if n in cls.model_fields]
            fresh = [name for name in own if name not in seen]
            if fresh:
                found.setdefault(base, []).extend(fresh)
                seen.update(fresh)
    return {area: found[area] for area in sorted(found, key=_place)}


def _place(area: type[BaseModel]) -> tuple[int, int]:
    modules = ("taskyard.plumbing.settings.areas", "taskyard.plumbing.settings.tools")
    rank = modules.index(area.__module__) if area.__module__ in modules else len(modules)
    return rank, inspect.getsourcelines(area)[1]


def markdown(classes: Mapping[str, type[BaseModel]]) -> str:
    """The tables of every area of `classes` (service name to its settings class)."""
    sections = []
    for area, names in areas_of(classes).items():
        readers = {name: _readers(name, classes) for name in names}
        rows = [_row(name, area.model_fields[name], readers[name]) for name in names]
        title, intro = _heading(area)
        sections.append(f"### {title}\n\n{intro}{_HEADER}\n" + "\n".join(rows))
    return "\n\n".join(sections) + "\n"


def _heading(area: type[BaseModel]) -> tuple[str, str]:
    """The area's title (its docstring's first line) and the rest as a paragraph."""
    title, _, rest = (area.__doc__ or area.__name__).strip().partition("\n")
    intro = " ".join(rest.split())
    return title.rstrip("."), f"{intro}\n\n" if intro else ""


def _readers(name: str, classes: Mapping[str, type[BaseModel]]) -> str:
    return ", ".join(service for service, cls in classes.items() if name in cls.model_fields)


def _row(name: str, field: FieldInfo, readers: str) -> str:
    text = " ".join((field.description or "").split()).replace("|", "\\|")
    cells = (f"`{env_name(name)}`", _type(field.annotation), _default(field), readers, text)
    return "| " + " | ".join(cells) + " |"


def _type(annotation: Any) -> str:
    if annotation is SecretStr:
        return "secret"
    args = [a for a in get_args(annotation) if a is not type(None) and a is not Ellipsis]
    if args and annotation is not None and get_args(annotation)[-1] is Ellipsis:
        return "CIDR list"
    if len(args) == 1:
        return f"{_type(args[0])} or unset"
    if args:  # a Literal: its choices
        return " / ".join(f"`{a}`" for a in args)
    return re.sub(r"^<class '(\w+)'>$", r"\1", str(getattr(annotation, "__name__", annotation)))


def _default(field: FieldInfo) -> str:
    if field.default_factory is not None:
        return "(computed)"
    value = field.default
    if value is PydanticUndefined or value is None:
        return "unset"
    if isinstance(value, SecretStr):
        value = value.get_secret_value()
    if value in ("", ()):
        return "empty"
    if isinstance(value, bool):
        return str(value).lower()
    return f"`{value}`"
