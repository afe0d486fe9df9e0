"""The WebBrowser toolkit through the executor: search, select, open, per-session results and
pages, failures as tool results; and built from settings as the tool worker builds it."""

from __future__ import annotations

import pytest
import redis
from fake_web import FakeWeb

from taskyard.agentkit.actions import (
    ActionExecutor,
    ActionResources,
    AsyncActionExecutor,
    MemoryResultStore,
    WebBrowser,
)
from taskyard.agentkit.actions.web import (
    AddressPolicy,
    MemoryPageCache,
    PageFetcher,
    RedisPageCache,
    RedisResultStore,
    SearxngClient,
)
from taskyard.agentkit.schema import ActionReturn, ActionStatusCode, AgentMessage
from taskyard.plumbing import keys
from taskyard.plumbing.settings import ToolWorkerSettings


def browser(
    web: FakeWeb, policy: AddressPolicy, max_chars: int = 8000, max_sessions: int = 1024
) -> WebBrowser:
    return WebBrowser(
        SearxngClient(web.url, timeout_s=5),
        PageFetcher(policy, timeout_s=5),
        MemoryResultStore(max_sessions=max_sessions),
        MemoryPageCache(),
        max_chars=max_chars,
    )


async def call(run: AsyncActionExecutor, name: str, session: str, **args: object) -> ActionReturn:
    reply = await run(AgentMessage(content={"name": name, "parameters": args}), session)
    assert isinstance(reply.content, ActionReturn) and reply.sender == "WebBrowser"
    return reply.content


@pytest.fixture
def run(web: FakeWeb, own_pages: AddressPolicy) -> AsyncActionExecutor:
    return AsyncActionExecutor([browser(web, own_pages)])


async def test_search_lists_numbered_results(run: AsyncActionExecutor, web: FakeWeb) -> None:
    ret = await call(run, "WebBrowser.search", "t:a", query="queues")
    assert ret.state == ActionStatusCode.SUCCESS
    assert ret.format_result() == (
        f"[0] Redis docs\n{web.url}/docs/redis\nAbout redis.\n\n"
        f"[1] Celery docs\n{web.url}/docs/celery\nAbout celery."
    )
    assert web.paths() == ["/search?q=queues&format=json"]


async def test_select_opens_a_result_as_readable_text(
    run: AsyncActionExecutor, web: FakeWeb
) -> None:
    await call(run, "WebBrowser.search", "t:a", query="queues")
    page = (await call(run, "WebBrowser.select", "t:a", index=1)).format_result()
    assert page == f"{web.url}/docs/celery\n\nCelery\n\nTasks run on workers."
    article = (await call(run, "WebBrowser.select", "t:a", index=0)).format_result()
    assert article.startswith(
        f"{web.url}/docs/redis\n\nRedis Streams explained - Example Docs\n\n"
        "Redis Streams explained\nRedis Streams are an append-only log"
    )
    assert "cookies" not in article


async def test_results_are_kept_per_session(run: AsyncActionExecutor) -> None:
    # Lagent keeps one result list per tool instance, so sessions would read each other's.
    await call(run, "WebBrowser.search", "t:alice", query="queues")
    await call(run, "WebBrowser.search", "t:bob", query="celery")
    alice = await call(run, "WebBrowser.select", "t:alice", index=1)
    bob = await call(run, "WebBrowser.select", "t:bob", index=0)
    assert "Tasks run on workers." in alice.format_result()
    assert "Tasks run on workers." in bob.format_result()
    assert (await call(run, "WebBrowser.select", "t:bob", index=1)).state == (
        ActionStatusCode.API_ERROR
    )
    carol = await call(run, "WebBrowser.select", "t:carol", index=0)
    assert carol.state == ActionStatusCode.API_ERROR
    assert carol.errmsg == "this session has no search results: call WebBrowser.search first"


async def test_select_out_of_range_and_empty_results(run: AsyncActionExecutor) -> None:
    await call(run, "WebBrowser.search", "t:a", query="queues")
    out = await call(run, "WebBrowser.select", "t:a", index=5)
    assert out.errmsg == "no result 5: the latest search listed 0 to 1"
    empty = await call(run, "WebBrowser.search", "t:a", query="nothing")
    assert empty.format_result() == "No results for 'nothing'."
    after = await call(run, "WebBrowser.select", "t:a", index=0)
    assert after.errmsg == "this session has no search results: call WebBrowser.search first"


async def test_a_session_opens_a_page_once(run: AsyncActionExecutor, web: FakeWeb) -> None:
    url = f"{web.url}/docs/celery"
    first = await call(run, "WebBrowser.open", "t:a", url=url)
    again = await call(run, "WebBrowser.open", "t:a", url=url)
    await call(run, "WebBrowser.search", "t:a", query="celery")
    selected = await call(run, "WebBrowser.select", "t:a", index=0)  # the same URL
    assert first.format_result() == again.format_result() == selected.format_result()
    assert web.paths().count("/docs/celery") == 1
    other = await call(run, "WebBrowser.open", "t:b", url=url)  # another session reads it anew
    assert other.format_result() == first.format_result()
    assert web.paths().count("/docs/celery") == 2


async def test_failures_are_not_cached(run: AsyncActionExecutor, web: FakeWeb) -> None:
    for _ in range(2):
        broken = await call(run, "WebBrowser.open", "t:a", url=f"{web.url}/broken/x")
        assert broken.state == ActionStatusCode.HTTP_ERROR
    assert web.paths().count("/broken/x") == 2


async def test_open_cuts_long_pages(web: FakeWeb, own_pages: AddressPolicy) -> None:
    run = AsyncActionExecutor([browser(web, own_pages, max_chars=100)])
    notes = await call(run, "WebBrowser.open", "t:a", url=f"{web.url}/notes.txt")
    assert notes.format_result() == f"{web.url}/notes.txt\n\nplain notes"
    long = await call(run, "WebBrowser.open", "t:a", url=f"{web.url}/long")
    assert long.format_result().endswith("x" * 100 + "\n[... cut at 100 characters]")


async def test_failures_come_back_as_results_the_model_reads(
    run: AsyncActionExecutor, web: FakeWeb, secret: FakeWeb
) -> None:
    broken = await call(run, "WebBrowser.open", "t:a", url=f"{web.url}/broken/x")
    assert (broken.state, broken.errmsg) == (
        ActionStatusCode.HTTP_ERROR,
        f"{web.url}/broken/x answered HTTP 500",
    )
    image = await call(run, "WebBrowser.open", "t:a", url=f"{web.url}/logo.png")
    assert image.state == ActionStatusCode.API_ERROR
    assert "image/png, which cannot be shown as text" in image.errmsg
    local = await call(run, "WebBrowser.open", "t:a", url="file:///etc/passwd")
    assert local.errmsg == "can only open http(s) URLs, not 'file:///etc/passwd'"
    refused = await call(run, "WebBrowser.open", "t:a", url=f"{secret.url}/docs/redis")
    assert refused.state == ActionStatusCode.API_ERROR
    assert refused.errmsg == (
        "refused to connect: 127.0.0.2 is a loopback address; only public addresses are opened"
    )
    assert secret.requests == []


async def test_an_unreachable_search_backend_is_an_http_error(
    web: FakeWeb, own_pages: AddressPolicy
) -> None:
    action = browser(web, own_pages)
    action.engine = SearxngClient("http://127.0.0.1:9", timeout_s=5)
    ret = await call(AsyncActionExecutor([action]), "WebBrowser.search", "t:a", query="redis")
    assert ret.state == ActionStatusCode.HTTP_ERROR
    assert ret.errmsg.startswith("request to http://127.0.0.1:9/search failed: ConnectError")


async def test_sessions_beyond_the_memory_bound_forget_their_results(
    web: FakeWeb, own_pages: AddressPolicy
) -> None:
    run = AsyncActionExecutor([browser(web, own_pages, max_sessions=2)])
    for session in ("t:1", "t:2", "t:3"):
        await call(run, "WebBrowser.search", session, query="redis")
    assert (await call(run, "WebBrowser.select", "t:1", index=0)).state == (
        ActionStatusCode.API_ERROR
    )
    assert (await call(run, "WebBrowser.select", "t:3", index=0)).state == (
        ActionStatusCode.SUCCESS
    )


def test_built_from_settings_as_the_tool_worker_builds_it() -> None:
    settings = ToolWorkerSettings(
        search_url="http://127.0.0.1:9/",
        search_engines=" duckduckgo, wikipedia ,",
        search_top_k=3,
        browse_allow_networks="10.20.0.0/16",
        browse_timeout_s=4,
        browse_max_bytes=4096,
        browse_max_chars=500,
    )
    action = WebBrowser.build(ActionResources(settings=settings))
    assert action.engine.search_url == "http://127.0.0.1:9/search"
    assert action.engine.engines == ("duckduckgo", "wikipedia")
    assert action.engine.top_k == 3
    policy = action.fetcher.network.policy
    assert policy == AddressPolicy(False, settings.browse_allow_networks)
    assert (action.fetcher.timeout_s, action.fetcher.max_bytes) == (4, 4096)
    assert action.max_chars == 500
    assert isinstance(action.results, RedisResultStore)
    assert isinstance(action.pages, RedisPageCache)


async def test_built_for_the_services_workers_share_results_and_pages_through_redis(
    web: FakeWeb, redis_server: str
) -> None:
    settings = ToolWorkerSettings(
        search_url=web.url, redis_url=f"{redis_server}/0", browse_allow_private=True
    )
    resources = ActionResources(settings=settings)
    # Two tool workers, each with its own WebBrowser: search on one, select on the other.
    worker_1 = AsyncActionExecutor([WebBrowser.build(resources)])
    worker_2 = AsyncActionExecutor([WebBrowser.build(resources)])
    await call(worker_1, "WebBrowser.search", "t:shared", query="queues")
    page = await call(worker_2, "WebBrowser.select", "t:shared", index=1)
    assert "Tasks run on workers." in page.format_result()
    again = await call(worker_1, "WebBrowser.open", "t:shared", url=f"{web.url}/docs/celery")
    assert again.format_result() == page.format_result()
    assert web.paths().count("/docs/celery") == 1  # worker 1 found worker 2's read in Redis
    other = await call(worker_2, "WebBrowser.select", "t:someone-else", index=1)
    assert other.state == ActionStatusCode.API_ERROR
    store = redis.Redis.from_url(f"{redis_server}/0")
    assert 0 < store.ttl(keys.browser_results("t:shared")) <= settings.search_results_ttl_s
    page_key = keys.browser_page("t:shared", f"{web.url}/docs/celery")
    assert 0 < store.ttl(page_key) <= settings.browse_cache_ttl_s
    store.close()


def test_the_default_settings_refuse_the_tests_own_pages(web: FakeWeb, redis_server: str) -> None:
    settings = ToolWorkerSettings(search_url=web.url, redis_url=f"{redis_server}/0")
    action = WebBrowser.build(ActionResources(settings=settings))
    message = AgentMessage(
        content={"name": "WebBrowser.open", "parameters": {"url": f"{web.url}/docs/celery"}}
    )
    reply = ActionExecutor([action])(message, "t:a")
    assert isinstance(reply.content, ActionReturn)
    assert "127.0.0.1 is a loopback address" in (reply.content.errmsg or "")
    assert web.requests == []


def test_the_sync_executor_drives_the_async_toolkit(web: FakeWeb, own_pages: AddressPolicy) -> None:
    run = ActionExecutor([browser(web, own_pages)])
    message = AgentMessage(
        content={"name": "WebBrowser.search", "parameters": {"query": "redis"}, "id": "c1"}
    )
    reply = run(message, "t:a")
    assert reply.extra_info == {"tool_call_id": "c1"}
    assert "[0] Redis docs" in reply.content.format_result()  # type: ignore[union-attr]
