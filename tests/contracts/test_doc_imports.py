"""Users import the library as the README, the docs and the examples show: every `from
taskyard...` and `import taskyard...` line in them (and any left from before the package was
named taskyard, `shared...`) names a module that exists and names it exports, so a moved module
cannot leave a page teaching an import that fails."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "examples").glob("*.py")),
]
FROM = re.compile(
    r"^\s*from ((?:taskyard|shared)(?:\.\w+)*) import \(?([\w, ]+)\)?\s*(?:#.*)?$", re.M
)
IMPORT = re.compile(r"^\s*import ((?:taskyard|shared)(?:\.\w+)+)\s*(?:#.*)?$", re.M)


def shown_imports(text: str) -> list[tuple[str, list[str]]]:
    found = [(m[1], [n.strip() for n in m[2].split(",") if n.strip()]) for m in FROM.finditer(text)]
    return found + [(m[1], []) for m in IMPORT.finditer(text)]


def broken(module: str, names: list[str]) -> list[str]:
    try:
        imported = importlib.import_module(module)
    except ImportError as exc:
        return [f"{module}: {exc}"]
    return [f"{module}.{name}" for name in names if not hasattr(imported, name)]


def test_every_import_a_page_shows_works() -> None:
    failures = []
    seen = 0
    for page in PAGES:
        for module, names in shown_imports(page.read_text()):
            seen += 1
            failures += [f"{page.relative_to(ROOT)}: {b}" for b in broken(module, names)]
    assert seen >= 10, "the pages show fewer imports than they did: is the pattern still right?"
    assert failures == []


def test_a_stale_import_is_seen() -> None:
    text = (
        "```python\nfrom shared.agents import Agent\nfrom taskyard.errors import TaskyardError\n```"
    )
    shown = shown_imports(text)
    assert shown == [("shared.agents", ["Agent"]), ("taskyard.errors", ["TaskyardError"])]
    assert broken("shared.agents", ["Agent"]) != []  # moved to taskyard.agentkit.agents
    assert broken("taskyard.errors", ["TaskyardError"]) == []
