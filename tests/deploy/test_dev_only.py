"""What only development needs stays out of production: the image copies no devstack, and
nothing it runs imports devstack; the library imports no service either."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _imported(path: Path) -> set[str]:
    """Every module `path` imports, anywhere in it (functions and TYPE_CHECKING blocks too)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def _importers(package: str, of: str) -> list[str]:
    modules = sorted((ROOT / package).rglob("*.py"))
    assert len(modules) > 10  # the walk found the package
    return [
        str(path.relative_to(ROOT))
        for path in modules
        if any(name == of or name.startswith(f"{of}.") for name in _imported(path))
    ]


@pytest.mark.parametrize("package", ["shared", "services"])
def test_nothing_shipped_imports_devstack(package: str) -> None:
    assert _importers(package, "devstack") == []


def test_the_library_imports_no_service() -> None:
    assert _importers("shared", "services") == []


def test_the_walk_sees_imports_inside_functions(tmp_path: Path) -> None:
    module = tmp_path / "lazy.py"
    module.write_text("def up():\n    from devstack.stack import LocalStack\n    import devstack\n")
    assert _imported(module) == {"devstack.stack", "devstack"}


def test_the_image_copies_shared_and_services_only() -> None:
    copied = re.findall(r"^COPY\s+(.+?)\s+\S+$", (ROOT / "Dockerfile").read_text(), re.M)
    sources = {source for line in copied for source in line.split()}
    assert {"shared", "services"} <= sources
    assert not any(source.startswith(("devstack", ".")) for source in sources)
