import pytest
import redis
from action_fakes import FakeSearch

from shared import keys
from shared.actions import (
    ActionExecutor,
    ActionResources,
    AsyncActionExecutor,
    MemoryResultStore,
    WebBrowser,
    WebClient,
)
from shared.schema import ActionReturn, ActionStatusCode, AgentMessage
from shared.settings import Settings


def browser(search: FakeSearch, max_chars: int = 8000) -> WebBrowser:
    client = WebClient(search.url, timeout=5, top_k=5)
    return WebBrowser(client, MemoryResultStore(), max_chars=max_chars)


async def call(run: AsyncActionExecutor, name: str, session: str, **args: object) -> ActionReturn:
    reply = await run(AgentMessage(content={"name": name, "parameters": args}), session)
    assert isinstance(reply.content, ActionReturn) and reply.sender == "WebBrowser"
    return reply.content


@pytest.fixture
def run(search_server: FakeSearch) -> AsyncActionExecutor:
    return AsyncActionExecutor([browser(search_server)])


async def test_search_lists_numbered_results(
    run: AsyncActionExecutor, search_server: FakeSearch
) -> None:
    ret = await call(run, "WebBrowser.search", "t:a", query="queues")
    assert ret.state == ActionStatusCode.SUCCESS
    assert ret.format_result() == (
        f"[0] Redis docs\n{search_server.url}/docs/redis\nAbout redis.\n\n"
        f"[1] Celery docs\n{search_server.url}/docs/celery\nAbout celery."
    )
    assert search_server.requests == ["/search?q=queues&format=json"]


async def test_select_opens_a_result_as_text(
    run: AsyncActionExecutor, search_server: FakeSearch
) -> None:
    await call(run, "WebBrowser.search", "t:a", query="queues")
    page = await call(run, "WebBrowser.select", "t:a", index=0)
    assert page.format_result() == (
        f"{search_server.url}/docs/redis\n\nRedis\n\nRedis streams\nXADD appends."
    )


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


async def test_open_reads_text_pages_and_cuts_long_ones(search_server: FakeSearch) -> None:
    run = AsyncActionExecutor([browser(search_server, max_chars=100)])
    notes = await call(run, "WebBrowser.open", "t:a", url=f"{search_server.url}/notes.txt")
    assert notes.format_result() == f"{search_server.url}/notes.txt\n\nplain notes"
    long = await call(run, "WebBrowser.open", "t:a", url=f"{search_server.url}/long")
    assert long.format_result().endswith("x" * 100 + "\n[... cut at 100 characters]")


async def test_http_failures_are_http_errors(
    run: AsyncActionExecutor, search_server: FakeSearch
) -> None:
    broken = await call(run, "WebBrowser.open", "t:a", url=f"{search_server.url}/broken/x")
    assert broken.state == ActionStatusCode.HTTP_ERROR
    assert broken.errmsg == f"{search_server.url}/broken/x answered HTTP 500"
    image = await call(run, "WebBrowser.open", "t:a", url=f"{search_server.url}/logo.png")
    assert image.state == ActionStatusCode.API_ERROR
    assert "image/png, which cannot be shown as text" in image.errmsg
    local = await call(run, "WebBrowser.open", "t:a", url="file:///etc/passwd")
    assert local.errmsg == "can only open http(s) URLs, not 'file:///etc/passwd'"


async def test_an_unreachable_search_backend_is_an_http_error() -> None:
    run = AsyncActionExecutor([WebBrowser(WebClient("http://127.0.0.1:9", timeout=5))])
    ret = await call(run, "WebBrowser.search", "t:a", query="redis")
    assert ret.state == ActionStatusCode.HTTP_ERROR
    assert ret.errmsg.startswith("request to http://127.0.0.1:9/search failed: ConnectError")


async def test_sessions_beyond_the_memory_bound_forget_their_results(
    search_server: FakeSearch,
) -> None:
    action = WebBrowser(WebClient(search_server.url), MemoryResultStore(max_sessions=2))
    run = AsyncActionExecutor([action])
    for session in ("t:1", "t:2", "t:3"):
        await call(run, "WebBrowser.search", session, query="redis")
    assert (await call(run, "WebBrowser.select", "t:1", index=0)).state == (
        ActionStatusCode.API_ERROR
    )
    assert (await call(run, "WebBrowser.select", "t:3", index=0)).state == (
        ActionStatusCode.SUCCESS
    )


async def test_built_for_the_services_results_are_shared_by_workers_through_redis(
    search_server: FakeSearch, redis_server: str
) -> None:
    settings = Settings(search_url=search_server.url, redis_url=f"{redis_server}/0")
    resources = ActionResources(settings=settings)
    # Two tool workers, each with its own WebBrowser: search on one, select on the other.
    worker_1 = AsyncActionExecutor([WebBrowser.build(resources)])
    worker_2 = AsyncActionExecutor([WebBrowser.build(resources)])
    await call(worker_1, "WebBrowser.search", "t:shared", query="queues")
    page = await call(worker_2, "WebBrowser.select", "t:shared", index=1)
    assert "Tasks run on workers." in page.format_result()
    other = await call(worker_2, "WebBrowser.select", "t:someone-else", index=1)
    assert other.state == ActionStatusCode.API_ERROR
    store = redis.Redis.from_url(f"{redis_server}/0")
    assert 0 < store.ttl(keys.browser_results("t:shared")) <= settings.search_results_ttl_s
    store.close()


def test_the_sync_executor_drives_the_async_toolkit(search_server: FakeSearch) -> None:
    run = ActionExecutor([browser(search_server)])
    message = AgentMessage(
        content={"name": "WebBrowser.search", "parameters": {"query": "redis"}, "id": "c1"}
    )
    reply = run(message, "t:a")
    assert reply.extra_info == {"tool_call_id": "c1"}
    assert "[0] Redis docs" in reply.content.format_result()  # type: ignore[union-attr]
