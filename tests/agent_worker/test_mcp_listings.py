"""The agent worker's side of MCP listings, on a real Redis: a kept listing is read and named
for the model; else a listing job goes to the tool workers and the step waits for its answer,
which is kept for the tenant's next steps; a failed listing says why and is not kept. A test
task here plays the tool worker."""

from __future__ import annotations

import asyncio
import base64
import json

import pytest
import redis
import redis.asyncio as aioredis

from services.agent_worker.mcp_tools import McpTools, McpToolsUnavailable
from taskyard.agentkit.actions.mcp.listing import ListedTool, ListingExchange, McpListing, server_id
from taskyard.agentkit.spec import AgentSpec, McpServer
from taskyard.plumbing import keys
from taskyard.plumbing.celery_app import make_celery
from taskyard.plumbing.settings import AgentWorkerSettings
from taskyard.runtime.jobs import McpListJob
from taskyard.runtime.store import TaskStore
from taskyard.runtime.task import TaskRecord

WEATHER = McpServer(name="weather", url="https://mcp.example.com/mcp")
FORECAST = ListedTool(
    name="forecast",
    description="The weather tomorrow.",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
)


@pytest.fixture
def settings(redis_server: str) -> AgentWorkerSettings:
    redis.Redis.from_url(f"{redis_server}/1").flushdb()
    return AgentWorkerSettings(redis_url=f"{redis_server}/0", broker_url=f"{redis_server}/1")


def _record(*servers: McpServer) -> TaskRecord:
    return TaskRecord(tenant="acme", session_id="s", input="x",
                      spec=AgentSpec(tools=[], mcp_servers=list(servers)))  # fmt: skip


async def _answer_one_job(
    store: TaskStore, settings: AgentWorkerSettings, listing: McpListing
) -> McpListJob:
    """Act as a tool worker: take the listing job off the MCP queue and answer it."""
    broker = aioredis.Redis.from_url(settings.broker_url)
    try:
        _, message = await broker.brpop(["tools.mcp"], timeout=10)
    finally:
        await broker.aclose()
    body = json.loads(base64.b64decode(json.loads(message)["body"]))
    job = McpListJob.model_validate(body[0][0])
    exchange = ListingExchange(store.r, settings.mcp_tools_ttl_s)
    await exchange.answer(job.request_id, job.tenant, job.session_id, job.server, listing)
    return job


async def test_a_kept_listing_is_offered_under_the_servers_name(
    store: TaskStore, settings: AgentWorkerSettings
) -> None:
    exchange = ListingExchange(store.r, 60)
    await exchange.answer("r1", "acme", "s0", WEATHER, McpListing(tools=[FORECAST]))
    tools = McpTools(store, settings, make_celery(settings))
    assert await tools.schemas(_record(WEATHER)) == [{
        "type": "function",
        "function": {"name": "weather.forecast", "description": "The weather tomorrow.",
                     "parameters": FORECAST.input_schema},
    }]  # fmt: skip
    assert redis.Redis.from_url(settings.broker_url).llen("tools.mcp") == 0  # nothing asked


async def test_a_listing_is_asked_of_a_tool_worker_once_and_kept(
    store: TaskStore, settings: AgentWorkerSettings
) -> None:
    tools = McpTools(store, settings, make_celery(settings))
    worker = asyncio.create_task(_answer_one_job(store, settings, McpListing(tools=[FORECAST])))
    schemas = await tools.schemas(_record(WEATHER))
    job = await worker
    assert (job.tenant, job.session_id, job.server) == ("acme", "s", WEATHER)
    assert [s["function"]["name"] for s in schemas] == ["weather.forecast"]
    kept = await store.r.ttl(keys.mcp_listing("acme", server_id(WEATHER)))
    assert 0 < kept <= settings.mcp_tools_ttl_s
    assert await tools.schemas(_record(WEATHER)) == schemas  # from Redis: no job this time
    assert redis.Redis.from_url(settings.broker_url).llen("tools.mcp") == 0


async def test_a_failed_listing_says_why_and_is_not_kept(
    store: TaskStore, settings: AgentWorkerSettings
) -> None:
    tools = McpTools(store, settings, make_celery(settings))
    failed = McpListing(error="MCP server 'weather': it answered HTTP 500")
    worker = asyncio.create_task(_answer_one_job(store, settings, failed))
    with pytest.raises(McpToolsUnavailable) as raised:
        await tools.schemas(_record(WEATHER))
    await worker
    assert str(raised.value) == (
        "MCP tools could not be listed: MCP server 'weather': it answered HTTP 500"
    )
    assert await store.r.exists(keys.mcp_listing("acme", server_id(WEATHER))) == 0


def test_a_servers_listing_is_kept_by_how_it_is_reached_not_its_name() -> None:
    renamed = WEATHER.model_copy(update={"name": "w"})
    filtered = WEATHER.model_copy(update={"tools": ["forecast"]})
    assert server_id(renamed) == server_id(WEATHER) != server_id(filtered)


async def test_a_local_servers_listing_is_kept_for_its_session_only(store: TaskStore) -> None:
    local = McpServer(name="files", command=["python3", "server.py"])
    exchange = ListingExchange(store.r, 60)
    await exchange.answer("r1", "acme", "s1", local, McpListing(tools=[FORECAST]))
    await exchange.answer("r2", "acme", "s1", WEATHER, McpListing(tools=[FORECAST]))
    assert await exchange.kept("acme", "s1", local) == McpListing(tools=[FORECAST])
    assert await exchange.kept("acme", "s2", local) is None  # its files may differ
    assert await exchange.kept("acme", "s2", WEATHER) == McpListing(tools=[FORECAST])
    assert await exchange.kept("other", "s1", WEATHER) is None


async def test_steps_waiting_for_one_listing_share_one_request(
    store: TaskStore, settings: AgentWorkerSettings
) -> None:
    tools = McpTools(store, settings, make_celery(settings))
    waiting = [asyncio.create_task(tools.schemas(_record(WEATHER))) for _ in range(5)]
    await _answer_one_job(store, settings, McpListing(tools=[FORECAST]))
    answers = await asyncio.gather(*waiting)
    assert all(a == answers[0] for a in answers) and len(answers[0]) == 1
    assert redis.Redis.from_url(settings.broker_url).llen("tools.mcp") == 0  # one job only
