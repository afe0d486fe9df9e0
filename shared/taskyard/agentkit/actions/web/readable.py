"""Readable text from an HTML page, by trafilatura: the main content, without navigation,
sidebars, footers, cookie banners, scripts or markup."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Readable", "readable_html"]


@dataclass(frozen=True)
class Readable:
    title: str
    text: str


def readable_html(html: str | bytes, url: str | None = None) -> Readable:
    """The page's ``<title>`` and its main text. A page with no main part (a list of links,
    a form) gives all its visible text instead. Bytes are decoded as the page declares."""
    import trafilatura  # here, not at the top: only tool workers read pages, and it takes 0.2 s

    tree = trafilatura.load_html(html)
    if tree is None:  # not HTML after all: shown as the text it is
        text = html.decode("utf-8", "replace") if isinstance(html, bytes) else html
        return Readable("", text.strip())
    title = " ".join((tree.findtext(".//title") or "").split())
    document = trafilatura.bare_extraction(
        tree, url=url, include_comments=False, include_tables=True, include_links=False
    )
    text = getattr(document, "text", None) or trafilatura.html2txt(tree)
    return Readable(title, text.strip())
