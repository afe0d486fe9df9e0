"""Readable text from an HTML page, for a model to read (no scripts, styles or markup)."""

from __future__ import annotations

import re
from html.parser import HTMLParser

__all__ = ["html_to_text"]

_SKIP = {"script", "style", "noscript", "template", "svg", "head"}
_BLOCK = {
    "p", "div", "br", "li", "ul", "ol", "tr", "table", "section", "article", "header",
    "footer", "nav", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "blockquote", "title",
}  # fmt: skip


class _TextCollector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title = ""
        self._skipping = 0
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._in_title = tag == "title"
        if tag in _SKIP:
            self._skipping += 1
        if tag in _BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        self._in_title = False
        if tag in _SKIP and self._skipping:
            self._skipping -= 1
        if tag in _BLOCK:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        elif not self._skipping:
            self.parts.append(data)


def html_to_text(html: str) -> str:
    """The page's title and visible text, one line per block, blank runs collapsed."""
    collector = _TextCollector()
    collector.feed(html)
    collector.close()
    lines = (" ".join(line.split()) for line in "".join(collector.parts).splitlines())
    body = re.sub(r"\n{2,}", "\n", "\n".join(line for line in lines if line))
    title = " ".join(collector.title.split())
    return f"{title}\n\n{body}" if title and body else title or body
