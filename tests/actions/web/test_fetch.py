"""Reading pages: readable text, text types, refusals, and the size and time caps, against
real HTTP servers on loopback."""

from __future__ import annotations

import re
import time

import pytest
from fake_web import FakeWeb

from taskyard.agentkit.actions.base import ActionError
from taskyard.agentkit.actions.web import AddressPolicy, Page, PageFetcher, WebFailure
from taskyard.agentkit.schema import ActionStatusCode


async def test_an_html_page_becomes_its_main_text(fetcher: PageFetcher, web: FakeWeb) -> None:
    page = await fetcher.fetch(f"{web.url}/docs/redis")
    assert page.url == f"{web.url}/docs/redis"
    assert page.title == "Redis Streams explained - Example Docs"
    assert page.text.startswith("Redis Streams explained\nRedis Streams are an append-only log")
    assert "acknowledges it with XACK" in page.text
    for boilerplate in ("About us", "cookies", "Related posts", "Copyright", "tracking", "color"):
        assert boilerplate not in page.text
    assert not page.truncated


async def test_text_pages_are_read_as_they_are_in_their_charset(
    fetcher: PageFetcher, web: FakeWeb
) -> None:
    assert (await fetcher.fetch(f"{web.url}/notes.txt")).text == "plain notes"
    assert (await fetcher.fetch(f"{web.url}/cafe.txt")).text == "un café crème"


async def test_what_cannot_be_text_is_refused_unread(fetcher: PageFetcher, web: FakeWeb) -> None:
    with pytest.raises(ActionError, match="image/png, which cannot be shown as text") as image:
        await fetcher.fetch(f"{web.url}/logo.png")
    assert image.value.state == ActionStatusCode.API_ERROR
    for url in ("file:///etc/passwd", "ftp://example.org/x", "gopher://x"):
        with pytest.raises(ActionError, match="can only open http"):
            await fetcher.fetch(url)


async def test_http_failures_are_http_errors(fetcher: PageFetcher, web: FakeWeb) -> None:
    with pytest.raises(WebFailure, match=r"/broken/x answered HTTP 500") as broken:
        await fetcher.fetch(f"{web.url}/broken/x")
    assert broken.value.state == ActionStatusCode.HTTP_ERROR
    with pytest.raises(WebFailure, match="redirected more than 5 times"):
        await fetcher.fetch(f"{web.url}/loop")
    assert web.paths().count("/loop") == 6
    with pytest.raises(WebFailure, match=re.escape("could not read http://127.0.0.1:9/: ")):
        await fetcher.fetch("http://127.0.0.1:9/")


async def test_a_redirect_elsewhere_than_http_is_refused(
    fetcher: PageFetcher, web: FakeWeb
) -> None:
    with pytest.raises(WebFailure, match="could not read"):
        await fetcher.fetch(f"{web.url}/redirect?to=file:///etc/passwd")


async def test_an_endless_body_is_cut_at_the_size_cap(
    own_pages: AddressPolicy, web: FakeWeb
) -> None:
    fetcher = PageFetcher(own_pages, timeout_s=30, max_bytes=256 * 1024)
    started = time.monotonic()
    page = await fetcher.fetch(f"{web.url}/endless")
    assert time.monotonic() - started < 10  # it stopped reading; the server would go on
    assert web.bytes_sent < 32 * 1024 * 1024  # and hung up: the server's writes failed early
    assert page.truncated
    assert page.text.startswith("endless text endless text")
    assert len(page.text) <= 256 * 1024


async def test_a_compressed_bomb_is_cut_after_decompression(
    own_pages: AddressPolicy, web: FakeWeb
) -> None:
    fetcher = PageFetcher(own_pages, timeout_s=30, max_bytes=64 * 1024)
    page = await fetcher.fetch(f"{web.url}/bomb")  # 32 MiB of HTML in a small gzip body
    assert page.truncated
    assert page.text.startswith("boom boom")
    assert len(page.text) < 64 * 1024  # only the first 64 KiB were inflated


async def test_a_slow_page_ends_at_the_time_cap(own_pages: AddressPolicy, web: FakeWeb) -> None:
    fetcher = PageFetcher(own_pages, timeout_s=0.5)
    started = time.monotonic()
    with pytest.raises(WebFailure, match=r"/slow took longer than 0.5 s to read") as slow:
        await fetcher.fetch(f"{web.url}/slow")  # a byte every 0.1 s: never idle, never done
    assert 0.5 <= time.monotonic() - started < 3
    assert slow.value.state == ActionStatusCode.HTTP_ERROR


def test_a_page_round_trips_as_json() -> None:
    page = Page(url="https://example.org/", title="T", text="body", truncated=True)
    assert Page.model_validate_json(page.model_dump_json()) == page
