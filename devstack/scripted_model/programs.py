"""Turn a user's question into the Python program the scripted model asks the tool to run."""

from __future__ import annotations

import re

__all__ = ["program_for"]

_FENCED = re.compile(r"```(?:python|py)\s*\n(.*?)```", re.DOTALL | re.IGNORECASE)
_NUMBER = r"-?\d+(?:\.\d+)?"
_SQUARE_ROOT = re.compile(
    rf"square root of\s+({_NUMBER})(?:.*?\b(\d+)\s+decimal(?: place)?s?)?", re.IGNORECASE
)
_ARITHMETIC = re.compile(rf"({_NUMBER})\s*(\*\*|//|[-+*/%])\s*({_NUMBER})")


def program_for(question: str) -> str:
    """The fenced ```python block if there is one, else a small program answering the question."""
    fenced = _FENCED.search(question)
    if fenced:
        return fenced.group(1)
    for derive in (_square_root, _arithmetic):
        program = derive(question)
        if program is not None:
            return program
    return f"print({re.findall(_NUMBER, question)!r})\n"


def _square_root(question: str) -> str | None:
    match = _SQUARE_ROOT.search(question)
    if match is None:
        return None
    number, places = match.group(1), match.group(2)
    value = f"math.sqrt({number})"
    # A fixed-point format keeps trailing zeros that round() would drop.
    printed = f'f"{{{value}:.{int(places)}f}}"' if places else value
    return f"import math\nprint({printed})\n"


def _arithmetic(question: str) -> str | None:
    match = _ARITHMETIC.search(question)
    if match is None:
        return None
    left, operator, right = match.groups()
    return f"print({left} {operator} {right})\n"
