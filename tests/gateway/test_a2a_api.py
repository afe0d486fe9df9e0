"""A2A at the gateway, in process on the run's real Redis, through the a2a-sdk's own client:
the cards, the key, a message as a task of a session, what is refused and why, and push
notification configs as the task's webhook. (Tasks that run: tests/e2e/test_a2a.py.)"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.client.auth import AuthInterceptor, CredentialService
from a2a.client.card_resolver import A2ACardResolver
from a2a.client.client import Client, ClientCallContext
from a2a.client.errors import A2AClientError
from a2a.compat.v0_3.jsonrpc_transport import CompatJsonRpcTransport
from a2a.types import (
    AgentCard,
    AuthenticationInfo,
    ContentTypeNotSupportedError,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    InvalidParamsError,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    Task,
    TaskNotFoundError,
    TaskPushNotificationConfig,
    TaskState,
    UnsupportedOperationError,
)
from fastapi import FastAPI

from services.gateway.app import create_app
from taskyard.plumbing.settings import GatewaySettings
from taskyard.runtime.store import TaskStore
from tests.plugins import composite_agents

BASE = "http://gateway.test"


class _Key(CredentialService):
    """The API key for whatever scheme the card names (the SDK applies it as the card says)."""

    def __init__(self, key: str) -> None:
        self.key = key

    async def get_credentials(self, scheme: str, context: ClientCallContext | None) -> str:
        return self.key


@asynccontextmanager
async def _running(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """The app, its lifespan held by a task of its own: a fixture's set-up and tear-down run
    in different tasks, and the lifespan's task groups (MCP's) must end in the one they began."""
    started, stop = asyncio.Event(), asyncio.Event()

    async def serve() -> None:
        async with app.router.lifespan_context(app):
            started.set()
            await stop.wait()

    server = asyncio.create_task(serve())
    waiting = asyncio.create_task(started.wait())
    await asyncio.wait({server, waiting}, return_when=asyncio.FIRST_COMPLETED)
    if server.done():
        waiting.cancel()
        server.result()  # the start-up's error
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as http:
            yield http
    finally:
        stop.set()
        await server


@pytest.fixture
async def http(settings: GatewaySettings) -> AsyncIterator[httpx.AsyncClient]:
    async with _running(create_app(settings)) as http:
        yield http


@pytest.fixture
def store(settings: GatewaySettings) -> Iterator[TaskStore]:
    yield TaskStore.from_url(settings.redis_url, settings.broker_url)


async def _client(http: httpx.AsyncClient, key: str = "key-a", path: str = "") -> Client:
    """The SDK's client from the card at `path` (non-streaming: nothing runs the tasks here)."""
    card = await A2ACardResolver(http, BASE + path).get_agent_card()
    config = ClientConfig(httpx_client=http, streaming=False, polling=True)
    return ClientFactory(config).create(card, [AuthInterceptor(_Key(key))])


def _message(*parts: Part, context_id: str = "", message_id: str = "m-1", **more: Any) -> Message:
    return Message(message_id=message_id, role=Role.ROLE_USER, parts=list(parts),
                   context_id=context_id, **more)  # fmt: skip


async def _send(client: Client, message: Message, **config: Any) -> Task:
    request = SendMessageRequest(message=message, configuration=SendMessageConfiguration(**config))
    (response,) = [r async for r in client.send_message(request)]
    return response.task


async def test_the_default_card_is_public_and_says_how_to_call(http: httpx.AsyncClient) -> None:
    card = await A2ACardResolver(http, BASE).get_agent_card()
    assert isinstance(card, AgentCard) and card.name == "taskyard"
    (interface,) = card.supported_interfaces
    assert interface.url == f"{BASE}/v1/a2a" and interface.protocol_binding == "JSONRPC"
    assert card.capabilities.streaming and card.capabilities.push_notifications
    scheme = card.security_schemes["bearer"].http_auth_security_scheme
    assert scheme.scheme == "bearer"
    assert [list(r.schemes) for r in card.security_requirements] == [["bearer"]]
    assert [skill.id for skill in card.skills] == ["IPythonInterpreter"]
    assert "stateful IPython" in card.skills[0].description


async def test_a_registered_agent_has_a_card_of_its_own(http: httpx.AsyncClient) -> None:
    assert composite_agents.WriterCritic  # registered on import
    card = await A2ACardResolver(http, f"{BASE}/a2a/writer_critic").get_agent_card()
    assert card.name == "writer_critic"
    assert card.supported_interfaces[0].url == f"{BASE}/v1/a2a/writer_critic"
    assert card.description.startswith("A writer, then a critic")
    assert (await http.get("/a2a/nobody/.well-known/agent-card.json")).status_code == 404


async def test_a_registered_agents_endpoint_runs_that_agent(
    http: httpx.AsyncClient, store: TaskStore
) -> None:
    assert composite_agents.WriterCritic  # registered on import
    client = await _client(http, path="/a2a/writer_critic")
    task = await _send(client, _message(Part(text="a haiku")))
    record = await store.get(task.id)
    assert record is not None and record.spec.agent == "writer_critic"
    default = await _send(await _client(http), _message(Part(text="hi"), message_id="m-2"))
    record = await store.get(default.id)
    assert record is not None and record.spec.agent is None
    missing = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task.id}}
    answer = await http.post("/v1/a2a/nobody", json=missing,
                             headers={"authorization": "Bearer key-a"})  # fmt: skip
    assert answer.status_code == 404


async def test_a_bad_key_is_refused_before_anything_is_read(http: httpx.AsyncClient) -> None:
    client = await _client(http, key="not-a-key")
    with pytest.raises(A2AClientError, match="401"):
        await _send(client, _message(Part(text="hi")))


async def test_a_message_is_a_task_and_its_context_a_session(
    http: httpx.AsyncClient, store: TaskStore
) -> None:
    client = await _client(http)
    first = await _send(client, _message(Part(text="x = 41"), context_id="chat-1"))
    assert first.context_id == "chat-1" and first.status.state == TaskState.TASK_STATE_SUBMITTED
    (asked,) = first.history
    assert asked.role == Role.ROLE_USER and asked.parts[0].text == "x = 41"
    assert asked.metadata["taskyard"]["kind"] == "input"
    second = await _send(client, _message(Part(text="x + 1"), context_id="chat-1",
                                          message_id="m-2"))  # fmt: skip
    records = [await store.get(t.id) for t in (first, second)]
    assert [(r.tenant, r.session_id) for r in records if r] == [("tenant-a", "chat-1")] * 2
    fresh = await _send(client, _message(Part(text="hi"), message_id="m-3"))
    assert fresh.context_id not in ("", "chat-1")  # a new session
    got = await client.get_task(GetTaskRequest(id=first.id, history_length=0))
    assert got.id == first.id and not got.history


async def test_a_message_sent_again_is_the_same_task(http: httpx.AsyncClient) -> None:
    client = await _client(http)
    once = await _send(client, _message(Part(text="once"), message_id="retry-me"))
    again = await _send(client, _message(Part(text="once"), message_id="retry-me"))
    assert again.id == once.id
    with pytest.raises(InvalidParamsError, match="different request body"):
        await _send(client, _message(Part(text="twice"), message_id="retry-me"))


async def test_data_parts_are_input_and_files_are_refused(
    http: httpx.AsyncClient, store: TaskStore
) -> None:
    client = await _client(http)
    data = Part()
    data.data.struct_value.update({"n": 2})
    task = await _send(client, _message(Part(text="double:"), data))
    record = await store.get(task.id)
    assert record is not None and record.input == 'double:\n\n{"n": 2.0}'
    with pytest.raises(ContentTypeNotSupportedError, match="url part"):
        await _send(client, _message(Part(url="https://x.test/a.png"), message_id="m-2"))


@pytest.mark.parametrize(
    ("message", "words"),
    [
        (_message(Part(text="hi"), context_id="not a session id"), "message.contextId"),
        (_message(Part(text="")), "message.parts"),
        (_message(Part(text="hi"), message_id=""), "messageId"),
    ],
)
async def test_a_bad_message_is_invalid_params_in_a2a_words(
    http: httpx.AsyncClient, message: Message, words: str
) -> None:
    with pytest.raises(InvalidParamsError, match=words):
        await _send(await _client(http), message)


async def test_only_the_callers_own_tasks_are_found(http: httpx.AsyncClient) -> None:
    mine = await _send(await _client(http), _message(Part(text="hi")))
    theirs = await _client(http, key="key-b")
    for task_id in (mine.id, "task_" + "0" * 32, "../etc"):
        with pytest.raises(TaskNotFoundError):
            await theirs.get_task(GetTaskRequest(id=task_id))
    with pytest.raises(TaskNotFoundError):  # continuing another tenant's task
        await _send(theirs, _message(Part(text="hi"), task_id=mine.id))


async def test_a_task_takes_no_more_input_and_says_how_to_go_on(http: httpx.AsyncClient) -> None:
    client = await _client(http)
    task = await _send(client, _message(Part(text="hi"), context_id="go-on"))
    with pytest.raises(UnsupportedOperationError, match="contextId 'go-on'"):
        await _send(client, _message(Part(text="more"), task_id=task.id, message_id="m-2"))


async def test_a_push_config_is_the_tasks_webhook(
    settings: GatewaySettings, store: TaskStore
) -> None:
    allowed = settings.model_copy(update={"webhook_allow_private": True})
    async with _running(create_app(allowed)) as http:
        client = await _client(http)
        task = await _send(client, _message(Part(text="hi")))
        auth = AuthenticationInfo(scheme="Bearer", credentials="receiver-secret")
        asked = TaskPushNotificationConfig(task_id=task.id, url="http://127.0.0.1:9/hook",
                                           token="tok-1", authentication=auth)  # fmt: skip
        made = await client.create_task_push_notification_config(asked)
        assert (made.id, made.url, made.token) == (task.id, asked.url, "tok-1")
        record = await store.get(task.id)
        assert record is not None and record.webhook is not None
        assert record.webhook.format == "a2a"
        assert record.webhook.authorization == "Bearer receiver-secret"
        shown = await http.get(f"/v1/tasks/{task.id}", headers={"authorization": "Bearer key-a"})
        assert shown.json()["webhook"]["sends"] == ["authorization", "x-a2a-notification-token"]
        assert "receiver-secret" not in shown.text and "tok-1" not in shown.text
        got = await client.get_task_push_notification_config(
            GetTaskPushNotificationConfigRequest(task_id=task.id, id=task.id)
        )
        assert got == made
        listed = await client.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task.id)
        )
        assert list(listed.configs) == [made]
        gone = DeleteTaskPushNotificationConfigRequest(task_id=task.id, id=task.id)
        await client.delete_task_push_notification_config(gone)
        await client.delete_task_push_notification_config(gone)  # idempotent
        with pytest.raises(TaskNotFoundError):
            await client.get_task_push_notification_config(
                GetTaskPushNotificationConfigRequest(task_id=task.id, id=task.id)
            )
        record = await store.get(task.id)
        assert record is not None and record.webhook is None


async def test_a_push_config_to_a_private_address_is_refused(http: httpx.AsyncClient) -> None:
    client = await _client(http)
    task = await _send(client, _message(Part(text="hi")))
    asked = TaskPushNotificationConfig(task_id=task.id, url="http://127.0.0.1:9/hook")
    with pytest.raises(InvalidParamsError, match="TASKYARD_WEBHOOK_ALLOW_PRIVATE"):
        await client.create_task_push_notification_config(asked)


async def test_a2a_0_3_clients_are_answered_too(http: httpx.AsyncClient) -> None:
    card = await A2ACardResolver(http, BASE).get_agent_card()
    legacy = CompatJsonRpcTransport(http, card, f"{BASE}/v1/a2a")
    context = ClientCallContext(service_parameters={"Authorization": "Bearer key-a"})
    immediately = SendMessageConfiguration(return_immediately=True)
    request = SendMessageRequest(message=_message(Part(text="hi")), configuration=immediately)
    sent = await legacy.send_message(request, context=context)
    got = await legacy.get_task(GetTaskRequest(id=sent.task.id), context=context)
    assert got.id == sent.task.id and got.history[0].parts[0].text == "hi"


async def test_what_taskyard_answers_elsewhere_is_said_so(http: httpx.AsyncClient) -> None:
    client = await _client(http)
    with pytest.raises(UnsupportedOperationError, match="GET /v1/tasks"):
        await client.list_tasks(ListTasksRequest())
    # The card says there is no extended card: the SDK's client does not ask for one...
    assert (await client.get_extended_agent_card(GetExtendedAgentCardRequest())).name
    # ...and a client that asks all the same is told so.
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetExtendedAgentCard", "params": {}}
    headers = {"authorization": "Bearer key-a", "a2a-version": "1.0"}
    answer = (await http.post("/v1/a2a", json=body, headers=headers)).json()
    assert answer["error"]["code"] == -32007


async def test_a_fault_is_a_bare_internal_error(
    http: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    task = await _send(await _client(http), _message(Part(text="hi")))

    def broken(self: object) -> Task:
        raise RuntimeError("the insides at /srv/taskyard")

    monkeypatch.setattr("services.gateway.resources.a2a.mapping.TaskView.task", broken)
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task.id}}
    headers = {"authorization": "Bearer key-a", "a2a-version": "1.0"}
    answer = await http.post("/v1/a2a", json=body, headers=headers)
    error = answer.json()["error"]
    assert (error["code"], error["message"]) == (-32603, "internal error")
    assert "insides" not in answer.text
