"""Readable text by the extractor (trafilatura), on pages shaped like real ones."""

from __future__ import annotations

from fake_web import REDIS_ARTICLE

from taskyard.agentkit.actions.web import Readable, readable_html


def test_the_main_text_without_navigation_banners_sidebars_or_footers() -> None:
    page = readable_html(REDIS_ARTICLE, "https://example.org/redis")
    assert page.title == "Redis Streams explained - Example Docs"
    assert page.text.splitlines() == [
        "Redis Streams explained",
        "Redis Streams are an append-only log: XADD appends an entry and returns its ID, made of "
        "a millisecond timestamp and a sequence number.",
        "Consumer groups let several workers share one stream, each entry going to one consumer "
        "of the group, which acknowledges it with XACK once it is done.",
    ]


def test_a_page_without_a_main_part_gives_all_its_visible_text() -> None:
    links = (
        "<title>Index</title><ul><li><a href='/a'>One</a></li><li><a href='/b'>Two</a></li></ul>"
    )
    assert readable_html(links) == Readable("Index", "One\nTwo")
    assert readable_html("<title>Celery</title><p>Tasks run on workers.</p>") == Readable(
        "Celery", "Tasks run on workers."
    )


def test_bytes_are_decoded_as_the_page_declares() -> None:
    html = '<meta charset="iso-8859-1"><title>Caf\xe9</title><p>Un caf\xe9 cr\xe8me.</p>'
    assert readable_html(html.encode("latin-1")) == Readable("Café", "Un café crème.")


def test_what_is_not_html_stays_as_it_is() -> None:
    assert readable_html("") == Readable("", "")
    assert readable_html(" just words ") == Readable("", "just words")
