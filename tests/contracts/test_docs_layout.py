"""The layout maps (the README's, docs/architecture.md's) match the tree: every name it gives
exists, it names every top-level directory, and where it opens a directory it names everything in
it.

The map's format: a line's names come first, separated by single spaces, then two or more
spaces and the description; a name indented by two spaces lies in the last unindented
directory; a line indented further only continues a description."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = ["README.md", "docs/architecture.md"]
# Not part of the tree a reader maps: caches, packaging output, dot-entries.
IGNORED = re.compile(r"^\.|^__pycache__$|\.egg-info$|^build$|^__init__\.py$")


def layout_block(page: str) -> str:
    section = (ROOT / page).read_text().split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    return section.split("```\n", 2)[1]


def named_paths(block: str) -> dict[str, list[str]]:
    """Each top-level name of the map, with the names the map gives inside it."""
    names: dict[str, list[str]] = {}
    parent = ""
    for line in block.splitlines():
        indent = len(line) - len(line.lstrip(" "))
        if indent > 2 or not line.strip():
            continue  # a description's continuation
        for name in re.split(r" {2,}", line.strip())[0].split(" "):
            if indent == 0:
                names[name] = []
                parent = name
            else:
                names[parent].append(name)
    return names


def entries(directory: Path) -> set[str]:
    return {
        f"{p.name}/" if p.is_dir() else p.name
        for p in directory.iterdir()
        if not IGNORED.search(p.name)
    }


@pytest.mark.parametrize("page", PAGES)
def test_every_name_in_the_map_exists(page: str) -> None:
    missing = []
    for top, inside in named_paths(layout_block(page)).items():
        for name in [top, *(top + child for child in inside)]:
            path = ROOT / name
            if not (path.is_dir() if name.endswith("/") else path.is_file()):
                missing.append(name)
    assert missing == []


@pytest.mark.parametrize("page", PAGES)
def test_the_map_names_every_top_level_directory_and_every_service(page: str) -> None:
    named = set(named_paths(layout_block(page)))
    top_dirs = {name for name in entries(ROOT) if name.endswith("/")}
    assert sorted(top_dirs - {name.split("/")[0] + "/" for name in named}) == []
    services = {name.removeprefix("services/") for name in named if name.startswith("services/")}
    assert sorted(entries(ROOT / "services") - services) == []


@pytest.mark.parametrize("page", PAGES)
def test_a_directory_the_map_opens_is_named_whole(page: str) -> None:
    unnamed = {
        top: sorted(entries(ROOT / top) - set(inside))
        for top, inside in named_paths(layout_block(page)).items()
        if inside
    }
    assert {top: names for top, names in unnamed.items() if names} == {}


def test_the_format_is_read_as_documented() -> None:
    block = (
        "shared/        the library\n"
        "  a.py b/      two names\n"
        "               a continuation: not.a/name\n"
        "Makefile\n"
    )
    assert named_paths(block) == {"shared/": ["a.py", "b/"], "Makefile": []}
