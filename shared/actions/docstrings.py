"""Google-style docstrings: the summary and the ``Args:`` descriptions a tool schema needs."""

from __future__ import annotations

import inspect
import re

__all__ = ["Docstring", "parse_docstring"]

_SECTION = re.compile(r"^(Args|Arguments|Parameters|Returns|Yields|Raises|Examples?|Notes?):\s*$")
_ARG = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


class Docstring:
    """What a tool description takes from a docstring."""

    def __init__(self, summary: str, args: dict[str, str]) -> None:
        self.summary = summary
        self.args = args


def parse_docstring(doc: str | None) -> Docstring:
    """Split a Google-style docstring into its text before the sections and its arguments."""
    lines = inspect.cleandoc(doc or "").splitlines()
    summary: list[str] = []
    args: dict[str, str] = {}
    section = current = None
    entry_indent = -1  # the indent of the first entry of the section
    for line in lines:
        header = _SECTION.match(line)
        if header:
            section, current, entry_indent = header.group(1), None, -1
        elif section is None:
            summary.append(line)
        elif section in ("Args", "Arguments", "Parameters") and line.strip():
            indent = len(line) - len(line.lstrip())
            entry_indent = indent if entry_indent < 0 else entry_indent
            current = _add_arg_line(args, line.strip(), indent == entry_indent, current)
    return Docstring(" ".join(" ".join(summary).split()), args)


def _add_arg_line(
    args: dict[str, str], line: str, is_entry: bool, current: str | None
) -> str | None:
    # An entry ("name (type): text") starts at the section's first indent; deeper lines continue.
    entry = _ARG.match(line) if is_entry else None
    if entry:
        name = entry.group(1).lstrip("*")
        args[name] = entry.group(2).strip()
        return name
    if current is not None:
        args[current] = f"{args[current]} {line}"
    return current
