"""The scripted model's web program: search the web, open the first result, quote the page.

A user turn asking to "search the web for <query>" with `WebBrowser` on offer starts it; each
tool result then gives the next turn. Pure functions over text, like `programs`.
"""

from __future__ import annotations

import re

__all__ = ["OPEN_TOOL", "SEARCH_TOOL", "first_result_url", "quote_page", "search_query"]

SEARCH_TOOL = "WebBrowser.search"
OPEN_TOOL = "WebBrowser.open"
_ASKED = re.compile(r"\bsearch the web for\s+(.+?)(?:\s+and\s|[.?!,;]|$)", re.IGNORECASE)
# WebBrowser.search lists "[0] title", then the URL on the next line.
_FIRST_URL = re.compile(r"^\[0\][^\n]*\n(https?://\S+)", re.MULTILINE)
_QUOTE_CHARS = 300


def search_query(question: str) -> str | None:
    """What "search the web for ..." asks to search for, if the question says that."""
    match = _ASKED.search(question)
    return match.group(1).strip() if match else None


def first_result_url(search_output: str) -> str | None:
    """The URL of result [0] in WebBrowser.search's listing."""
    match = _FIRST_URL.search(search_output)
    return match.group(1) if match else None


def quote_page(page_output: str) -> str:
    """An answer quoting the start of a page WebBrowser.open read (its URL, a blank line, text)."""
    url, _, text = page_output.partition("\n\n")
    excerpt = " ".join(text.split())[:_QUOTE_CHARS].rstrip()
    return f'{url} says: "{excerpt}"'
