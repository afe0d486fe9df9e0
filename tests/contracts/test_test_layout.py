"""Test modules are found by basename (no packages under tests/): two with the same name in
different folders stop pytest at collection ("import file mismatch"), the whole suite with it.
It happened twice while the tree grew; this catches it before a run does."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def clashes(paths: list[Path]) -> dict[str, list[str]]:
    """Test module basenames used more than once, with where."""
    where: dict[str, list[str]] = defaultdict(list)
    for path in paths:
        where[path.name].append(str(path.parent.relative_to(TESTS)))
    return {name: sorted(dirs) for name, dirs in where.items() if len(dirs) > 1}


def test_every_test_module_has_a_basename_of_its_own() -> None:
    modules = sorted(TESTS.rglob("test_*.py"))
    assert len(modules) > 50
    assert clashes(modules) == {}


def test_a_clash_is_seen() -> None:
    planted = [TESTS / "store/test_sandboxes.py", TESTS / "tool_worker/test_sandboxes.py"]
    assert clashes(planted) == {"test_sandboxes.py": ["store", "tool_worker"]}
