"""Docstrings: the summary and the argument descriptions a tool schema needs.

Google, NumPy, Sphinx (reST) and Epydoc styles are read by `docstring_parser`, which picks the
style that finds the most in the docstring.
"""

from __future__ import annotations

import docstring_parser

__all__ = ["Docstring", "parse_docstring"]


class Docstring:
    """What a tool description takes from a docstring."""

    def __init__(self, summary: str, args: dict[str, str]) -> None:
        self.summary = summary
        self.args = args


def parse_docstring(doc: str | None) -> Docstring:
    """The text before the sections (whitespace folded) and each argument's description."""
    try:
        parsed = docstring_parser.parse(doc or "")
    except docstring_parser.ParseError as exc:
        raise ValueError(f"cannot read the docstring {doc!r:.60}: {exc}") from exc
    text = " ".join(part for part in (parsed.short_description, parsed.long_description) if part)
    args = {
        param.arg_name.lstrip("*"): _fold(param.description or "")
        for param in parsed.params
        if param.args[0] != "attribute"  # a class's attributes are not a call's arguments
    }
    return Docstring(_fold(text), args)


def _fold(text: str) -> str:
    return " ".join(text.split())
