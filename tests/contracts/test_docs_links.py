"""The README and docs/*.md link only to what exists: every relative link to a file of the
tree, every `#anchor` to a heading of its page (as GitHub names headings); and the README
links every page of docs/."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_FENCED = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")  # images too: ![alt](target)
_HEADING = re.compile(r"^#{1,6} +(.+?) *$", re.MULTILINE)
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)


def anchors(page: Path) -> set[str]:
    """The page's heading anchors, as GitHub makes them: lower case, punctuation dropped,
    spaces as hyphens, a repeated one suffixed -1, -2, ..."""
    seen: dict[str, int] = {}
    for heading in _HEADING.findall(_FENCED.sub("", page.read_text())):
        slug = re.sub(r"[^\w\- ]", "", heading.replace("`", "").lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        if count:
            seen[f"{slug}-{count}"] = 1
    return set(seen)


def links(page: Path) -> list[str]:
    """The page's link targets outside code (a block's or a span's text is not a link)."""
    prose = _INLINE_CODE.sub("", _FENCED.sub("", page.read_text()))
    return _LINK.findall(prose)


def broken_links(page: Path) -> list[str]:
    """The page's relative links whose file, or whose anchor in a Markdown file, is missing."""
    broken = []
    for target in links(page):
        if _SCHEME.match(target):
            continue  # a URL: not ours to check offline
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{target}: no heading #{anchor} in {resolved.name}")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_every_relative_link_resolves(page: Path) -> None:
    assert broken_links(page) == []


def test_the_readme_links_every_docs_page() -> None:
    linked = {(ROOT / target.partition("#")[0]).resolve() for target in links(PAGES[0])}
    assert len(PAGES) > 1
    assert [page.name for page in PAGES[1:] if page not in linked] == []


def test_a_broken_link_or_anchor_is_found(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text(
        "# Other\n\n## A `code` heading: yes\n\n## Twice\n## Twice\n"
    )
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n[fine](other.md#a-code-heading-yes) [fine](other.md#twice-1) [fine](#page)\n"
        "[gone](missing.md) [no anchor](other.md#nowhere) [self](#nope) [web](https://x.invalid)\n"
        "`[in code](missing.md)`\n\n```\n[in a block](missing.md)\n```\n"
    )
    assert broken_links(page) == [
        "missing.md: no such file",
        "other.md#nowhere: no heading #nowhere in other.md",
        "#nope: no heading #nope in page.md",
    ]
