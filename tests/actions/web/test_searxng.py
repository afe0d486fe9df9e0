"""Search through a SearxNG-shaped JSON API served on loopback."""

from __future__ import annotations

import re

import pytest
from fake_web import FakeWeb

from taskyard.agentkit.actions.web import SearchHit, SearxngClient, WebFailure
from taskyard.agentkit.schema import ActionStatusCode


async def test_hits_come_from_the_json_api_with_the_configured_engines(web: FakeWeb) -> None:
    client = SearxngClient(web.url + "/", engines=("duckduckgo", "wikipedia"), timeout_s=5)
    hits = await client.search("queues")
    assert hits == [
        SearchHit(f"{web.url}/docs/redis", "Redis docs", "About redis."),
        SearchHit(f"{web.url}/docs/celery", "Celery docs", "About celery."),
    ]
    assert web.paths() == ["/search?q=queues&format=json&engines=duckduckgo%2Cwikipedia"]


async def test_no_engines_configured_leaves_the_choice_to_searxng(web: FakeWeb) -> None:
    hits = await SearxngClient(web.url, top_k=1, timeout_s=5).search("queues")
    assert [hit.title for hit in hits] == ["Redis docs"]
    assert web.paths() == ["/search?q=queues&format=json"]


async def test_no_results_is_an_empty_list_but_failed_engines_are_an_error(web: FakeWeb) -> None:
    client = SearxngClient(web.url, timeout_s=5)
    assert await client.search("nothing") == []
    with pytest.raises(WebFailure, match=r"did not answer \(google: timeout\)") as down:
        await client.search("engines down")
    assert down.value.state == ActionStatusCode.HTTP_ERROR


async def test_an_instance_without_json_says_how_to_turn_it_on(web: FakeWeb) -> None:
    web.searx_json = False
    with pytest.raises(WebFailure, match=re.escape("SearxNG must list json in search.formats")):
        await SearxngClient(web.url, timeout_s=5).search("queues")


async def test_an_answer_that_is_not_searxng_json_is_an_error(web: FakeWeb) -> None:
    with pytest.raises(WebFailure, match="did not answer SearxNG's JSON"):
        await SearxngClient(web.url, timeout_s=5).search("malformed")


async def test_an_unreachable_backend_is_an_http_error() -> None:
    with pytest.raises(WebFailure, match=r"request to http://127.0.0.1:9/search failed: Connect"):
        await SearxngClient("http://127.0.0.1:9", timeout_s=5).search("redis")
