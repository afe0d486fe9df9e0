"""End to end: the scripted model searches the web, opens a result and quotes it, through the
gateway, the agent worker and the tool worker, every service a process. The search API
(SearxNG's JSON shape) and the pages are a fake web on loopback, started by this test; the tool
worker may open 127.0.0.1 only because the stack's settings allow that one address."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from e2e_support import wait_status
from fake_web import FakeWeb, serve_fake_web

from devstack.stack import LocalStack
from taskyard.client import TaskyardClient

pytestmark = pytest.mark.e2e

QUESTION = "Search the web for redis streams and quote the first result."
BROWSER = {"tools": ["WebBrowser"], "max_steps": 6}


@pytest.fixture(scope="module")
def web() -> Iterator[FakeWeb]:
    with serve_fake_web("127.0.0.1") as served:
        yield served


@pytest.fixture(scope="module")
def secret() -> Iterator[FakeWeb]:
    """A server on another loopback address, which the settings do not allow."""
    with serve_fake_web("127.0.0.2") as served:
        yield served


@pytest.fixture(scope="module")
def client(web: FakeWeb) -> Iterator[TaskyardClient]:
    env = {
        "TASKYARD_SEARCH_URL": web.url,
        "TASKYARD_BROWSE_ALLOW_NETWORKS": "127.0.0.1/32",  # the fake web, and nothing else
        "TASKYARD_SANDBOX_WARM_POOL": "0",  # no code runs in these tasks
    }
    stack = LocalStack(sandbox_backend="local", extra_env=env, tool_queues=("tools.WebBrowser",))
    stack.start()
    client = TaskyardClient(stack.gateway_url, stack.api_key)
    yield client
    client.close()
    stack.stop()


def _calls(message: dict) -> list[dict]:
    return [
        {"name": call["name"], "parameters": call["parameters"]}
        for call in message["formatted"]["tool_calls"]
    ]


def _output(message: dict) -> str:
    content = message["content"]
    return content["errmsg"] or "\n".join(part["content"] for part in content["result"])


def test_the_model_searches_opens_the_first_result_and_quotes_it(
    client: TaskyardClient, web: FakeWeb
) -> None:
    task = wait_status(client, client.submit(QUESTION, session_id="web-1", agent=BROWSER)["id"])
    assert task["status"] == "succeeded", task
    user, search, results, opened, page, answer = task["messages"]
    assert user["content"] == QUESTION
    assert _calls(search) == [
        {"name": "WebBrowser.search", "parameters": {"query": "redis streams"}}
    ]
    assert _output(results).startswith(f"[0] Redis docs\n{web.url}/docs/redis\nAbout redis.")
    first = f"{web.url}/docs/redis"
    assert _calls(opened) == [{"name": "WebBrowser.open", "parameters": {"url": first}}]
    text = _output(page)
    assert text.startswith(f"{first}\n\nRedis Streams explained - Example Docs\n\n")
    assert "XADD appends an entry" in text and "cookies" not in text
    quoted = f'{first} says: "Redis Streams explained - Example Docs Redis Streams explained'
    assert answer["content"].startswith(quoted)
    assert answer["content"].endswith("(scripted model)")
    assert task["result"] == answer["content"]
    assert web.paths() == ["/search?q=redis+streams&format=json", "/docs/redis"]


def test_a_session_reads_a_page_once(client: TaskyardClient, web: FakeWeb) -> None:
    call = {"name": "WebBrowser.open", "arguments": {"url": f"{web.url}/docs/celery"}}
    text = f"Open the Celery docs.\n```tool\n{json.dumps(call)}\n```"
    for _ in range(2):
        task = wait_status(client, client.submit(text, session_id="web-2", agent=BROWSER)["id"])
        assert task["status"] == "succeeded", task
        assert "Tasks run on workers." in task["result"]
    assert web.paths().count("/docs/celery") == 1  # the second task's read came from Redis


def test_the_tool_worker_refuses_addresses_the_settings_do_not_allow(
    client: TaskyardClient, secret: FakeWeb
) -> None:
    call = {"name": "WebBrowser.open", "arguments": {"url": f"{secret.url}/docs/redis"}}
    text = f"Open this page.\n```tool\n{json.dumps(call)}\n```"
    task = wait_status(client, client.submit(text, session_id="web-3", agent=BROWSER)["id"])
    assert task["status"] == "succeeded", task  # the model read the refusal and answered
    refusal = (
        "refused to connect: 127.0.0.2 is a loopback address; only public addresses are opened"
    )
    assert _output(task["messages"][2]) == refusal
    assert task["result"] == f"The tool reported an error: {refusal} (scripted model)"
    assert secret.requests == []
