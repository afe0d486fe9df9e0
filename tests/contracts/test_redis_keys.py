"""Every Redis key is named in shared/taskyard/plumbing/keys.py: no other module of shared/ or
services/ spells a string shaped like one of our keys."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KEYS = ROOT / "shared/taskyard/plumbing/keys.py"
# Not scanned yet; the lead shrinks this as their owners move their keys to
# shared/taskyard/plumbing/keys.py. (Their key-shaped strings that are no keys, like the
# proxy's "host:port", need a rewrite.)
NOT_SCANNED: tuple[str, ...] = ()
NOT_A_KEY = "# not a Redis key"


def _literals(tree: ast.AST) -> list[ast.Constant | ast.JoinedStr]:
    """The module's string literals and f-strings; docstrings and f-strings' parts left out."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                skipped.add(id(first.value))
        elif isinstance(node, ast.JoinedStr):
            skipped |= {id(value) for value in node.values}
    found: list[ast.Constant | ast.JoinedStr] = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.JoinedStr) or (
            isinstance(node, ast.Constant) and isinstance(node.value, str)
        ):
            found.append(node)
    return found


def _text(node: ast.Constant | ast.JoinedStr) -> str:
    """The literal with each placeholder as ``{}``."""
    if isinstance(node, ast.Constant):
        return str(node.value)
    return "".join(str(v.value) if isinstance(v, ast.Constant) else "{}" for v in node.values)


def _vocabulary() -> tuple[set[str], set[str]]:
    """The words keys.py's keys start with ("task", "session", ...) and the words that follow
    a colon in them ("events", "memory", ...)."""
    texts = [_text(node) for node in _literals(ast.parse(KEYS.read_text()))]
    prefixes = {m.group(1) for t in texts if (m := re.match(r"([a-z_]+):", t))}
    suffixes = {word for t in texts for word in re.findall(r":([a-z_]+)", t)}
    return prefixes, suffixes


def key_shaped(source: str, prefixes: set[str], suffixes: set[str]) -> list[tuple[int, str]]:
    """(line, text) of each literal of `source` that looks like a Redis key of ours: it starts
    with a key prefix and a colon (``"task:"``, ``f"session:{t}"``), it is placeholders joined
    by colons (``f"{tenant}:{session_id}"``), or a colon joins it to a key's part
    (``f"{base}:events"``). A line that says ``# not a Redis key`` is passed over: colons have
    other uses (``f"{host}:{port}"``)."""
    lines = source.splitlines()
    starts = re.compile(rf"({'|'.join(sorted(prefixes))}):(?!\s)")
    joined = re.compile(r"(\{\}:)+(\{\})?")
    part = re.compile(rf":({'|'.join(sorted(suffixes))})(:|{{|$)")
    found = []
    for node in _literals(ast.parse(source)):
        text = _text(node)
        if NOT_A_KEY in lines[node.lineno - 1]:
            continue
        if starts.match(text) or joined.fullmatch(text) or part.search(text):
            found.append((node.lineno, text))
    return sorted(found)


def _scanned() -> list[Path]:
    paths = [*ROOT.glob("shared/**/*.py"), *ROOT.glob("services/**/*.py")]
    return [
        p for p in paths if p != KEYS and not p.relative_to(ROOT).as_posix().startswith(NOT_SCANNED)
    ]


def test_keys_are_only_spelled_in_shared_keys() -> None:
    prefixes, suffixes = _vocabulary()
    assert {"task", "session", "tenant", "taskyard"} <= prefixes
    assert {"events", "memory", "claim"} <= suffixes
    found = {
        p.relative_to(ROOT).as_posix(): hits
        for p in _scanned()
        if (hits := key_shaped(p.read_text(), prefixes, suffixes))
    }
    assert found == {}


def test_the_scan_finds_a_planted_key() -> None:
    planted = '''
"""A docstring may say session:{tenant}:{id}:memory."""
import redis

LIVE = "tasks:live"


def memory_len(r: redis.Redis, tenant: str, session_id: str, base: str) -> int:
    r.get(f"{tenant}:{session_id}")
    r.get(f"{base}:events")
    print(f"{tenant}: no such session", "taskyard: stopped", f"{base}:{{'a': 1}}")
    print(f"{tenant}:{base}")  # not a Redis key
    return r.llen(f"session:{tenant}:{session_id}:memory")
'''
    prefixes, suffixes = _vocabulary()
    assert key_shaped(planted, prefixes, suffixes) == [
        (5, "tasks:live"),
        (9, "{}:{}"),
        (10, "{}:events"),
        (13, "session:{}:{}:memory"),
    ]
