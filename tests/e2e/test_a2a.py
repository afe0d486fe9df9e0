"""A2A through the real stack (gateway, workers, Redis, Docker sandboxes, the scripted model),
spoken by the a2a-sdk's own client: a streamed two-turn conversation of one contextId with a
tool call, a task cancelled mid-run, a stream dropped mid-run and subscribed to again, push
notifications as signed webhooks, the tenant's key, JSON-RPC's errors, an A2A 0.3 client's
stream, and docs/api.md's A2A examples as written.

Where a test needs the task to wait (a drop, a push config set on a live task), the scripted
model holds its calls (`hold_until`) until the test lets them go: nothing depends on timing."""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import aclosing, asynccontextmanager
from pathlib import Path
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
    AuthenticationInfo,
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskNotCancelableError,
    TaskNotFoundError,
    TaskPushNotificationConfig,
    TaskState,
    UnsupportedOperationError,
)
from a2a.utils.proto_utils import parse_lenient
from e2e_support import HookReceiver, configure_model

from devstack.stack import LocalStack
from taskyard.client import TaskyardClient
from taskyard.client.webhooks import verify

pytestmark = pytest.mark.e2e

KEY, OTHER_KEY = "dev-key", "other-key"  # dev-key: the docs' examples run as written
FOREVER = "```python\nimport time\ntime.sleep(600)\nprint('woke up')\n```"
TRANSCRIPT = ("input", "tool_call", "tool_result", "reply")


@pytest.fixture(scope="module")
def stack(sandbox_image: str) -> Iterator[LocalStack]:
    stack = LocalStack(api_keys=f"{KEY}=tenant-a,{OTHER_KEY}=tenant-b").start()
    yield stack
    stack.stop()


@pytest.fixture
def rest(stack: LocalStack) -> Iterator[TaskyardClient]:
    """taskyard's own API, with the same tenant's key: what the A2A calls did, seen from it."""
    client = TaskyardClient(stack.gateway_url, KEY)
    yield client
    client.close()


class _Key(CredentialService):
    """The API key, for the scheme the card names (the SDK sends it as the card says)."""

    def __init__(self, key: str) -> None:
        self.key = key

    async def get_credentials(self, scheme: str, context: ClientCallContext | None) -> str:
        return self.key


async def _client(
    http: httpx.AsyncClient, url: str, key: str | None = KEY, streaming: bool = True
) -> Client:
    """The SDK's client, made from the card the gateway serves (read without a key)."""
    card = await A2ACardResolver(http, url).get_agent_card()
    interceptors = [AuthInterceptor(_Key(key))] if key else []
    config = ClientConfig(httpx_client=http, streaming=streaming)
    return ClientFactory(config).create(card, interceptors)


@asynccontextmanager
async def _a2a(
    stack: LocalStack, key: str | None = KEY, streaming: bool = True
) -> AsyncIterator[Client]:
    async with httpx.AsyncClient(timeout=120) as http:
        yield await _client(http, stack.gateway_url, key, streaming)


def _request(text: str, context_id: str = "", **config: Any) -> SendMessageRequest:
    message = Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER,
                      parts=[Part(text=text)], context_id=context_id)  # fmt: skip
    return SendMessageRequest(message=message, configuration=SendMessageConfiguration(**config))


async def _until(
    stream: AsyncIterator[StreamResponse], stop: Callable[[StreamResponse], bool]
) -> list[StreamResponse]:
    """The stream's events up to the first that `stop` picks (the stream stays open)."""
    seen = []
    async for event in stream:
        seen.append(event)
        if stop(event):
            break
    return seen


def _state(event: StreamResponse) -> TaskState | None:
    if event.HasField("status_update"):
        return event.status_update.status.state
    return event.task.status.state if event.HasField("task") else None


def _transcript(events: list[StreamResponse]) -> list[Message]:
    """The transcript's messages the events carry: a task's history, then each status update's
    message (a note about a state is not the transcript's)."""
    found: list[Message] = []
    for event in events:
        if event.HasField("task"):
            found.extend(event.task.history)
        elif event.HasField("status_update") and event.status_update.status.HasField("message"):
            found.append(event.status_update.status.message)
    return [m for m in found if m.metadata["taskyard"]["kind"] in TRANSCRIPT]


def _kinds(messages: list[Message]) -> list[str]:
    return [m.metadata["taskyard"]["kind"] for m in messages]


def _calls_a_tool(event: StreamResponse) -> bool:
    return "tool_call" in _kinds(_transcript([event]))


def _answer(events: list[StreamResponse]) -> str:
    (answer,) = [e.artifact_update.artifact for e in events if e.HasField("artifact_update")
                 and e.artifact_update.artifact.name == "answer"]  # fmt: skip
    return answer.parts[0].text


def _task_id(events: list[StreamResponse]) -> str:
    assert events[0].HasField("task"), events[0]  # a stream starts with the task
    return events[0].task.id


async def test_two_turns_of_one_context_stream_a_tool_call_and_share_a_session(
    stack: LocalStack, rest: TaskyardClient
) -> None:
    async with _a2a(stack) as client:
        turns: list[list[StreamResponse]] = []
        for code in ("x = 41\nprint(x)", "print(x + 1)"):
            request = _request(f"```python\n{code}\n```", context_id="a2a-chat")
            turns.append([event async for event in client.send_message(request)])
        for events in turns:
            assert {e.task.context_id for e in events if e.HasField("task")} == {"a2a-chat"}
            transcript = _transcript(events)
            assert _kinds(transcript) == list(TRANSCRIPT)  # each message once, none missed
            assert len({m.message_id for m in transcript}) == len(TRANSCRIPT)
            call = transcript[1].parts[-1].data.struct_value
            assert call["name"] == "IPythonInterpreter"
            states = [s for e in events if (s := _state(e)) is not None]
            assert TaskState.TASK_STATE_WORKING in states
            assert states[-1] == TaskState.TASK_STATE_COMPLETED
            assert events[-1].HasField("status_update")
        assert "41" in _answer(turns[0])
        assert "42" in _answer(turns[1])  # the second turn ran in the first one's interpreter
        first, second = (_task_id(events) for events in turns)
        got = await client.get_task(GetTaskRequest(id=first))
        assert got.status.state == TaskState.TASK_STATE_COMPLETED
        assert _kinds(list(got.history)) == list(TRANSCRIPT)
    # One session: both tasks, and the first turn's messages in the memory the second one had.
    session = rest.http.get("/v1/sessions/a2a-chat").json()
    assert session["tasks"] == [second, first] and session["total_messages"] == 8


async def test_a_task_cancelled_mid_run_ends_canceled_on_its_stream(
    stack: LocalStack, rest: TaskyardClient
) -> None:
    async with _a2a(stack) as client:
        stream = client.send_message(_request(FOREVER))
        async with aclosing(stream):
            before = await _until(stream, _calls_a_tool)  # the cell sleeps for ten minutes
            task_id = _task_id(before)
            cancelled = await client.cancel_task(CancelTaskRequest(id=task_id))
            assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
            after = [event async for event in stream]  # the stream ends with the task
        last = after[-1].status_update.status
        assert last.state == TaskState.TASK_STATE_CANCELED
        assert "cancelled by the client" in last.message.parts[0].text
        assert "tool_result" not in _kinds(_transcript(after))
        with pytest.raises(TaskNotCancelableError):
            await client.cancel_task(CancelTaskRequest(id=task_id))
        with pytest.raises(UnsupportedOperationError, match="ended"):
            [e async for e in client.subscribe(SubscribeToTaskRequest(id=task_id))]
    assert rest.get(task_id)["status"] == "cancelled"


async def test_a_dropped_stream_subscribed_to_again_gets_the_rest(stack: LocalStack) -> None:
    configure_model(stack, hold_until=1000)  # the task's model call waits for the test
    try:
        # The first connection: the task starts, then the connection drops mid-run.
        async with httpx.AsyncClient(timeout=120) as dropped:
            client = await _client(dropped, stack.gateway_url)
            stream = client.send_message(_request("```python\nprint('went on')\n```"))
            async with aclosing(stream):
                before = await _until(stream, lambda e: _state(e) == TaskState.TASK_STATE_WORKING)
        task_id = _task_id(before)
        async with _a2a(stack) as client:
            again = client.subscribe(SubscribeToTaskRequest(id=task_id))
            async with aclosing(again):
                snapshot = await anext(again)  # the task as it stands
                assert snapshot.task.status.state == TaskState.TASK_STATE_WORKING
                configure_model(stack, hold_until=None)  # the model answers
                rest_of_it = [event async for event in again]
    finally:
        configure_model(stack, hold_until=None)
    seen = _transcript(before) + _transcript([snapshot]) + _transcript(rest_of_it)
    assert _kinds(seen) == ["input", "input", "tool_call", "tool_result", "reply"]
    assert seen[0] == seen[1]  # the snapshot repeats what was seen; the rest is new
    assert _kinds(_transcript(rest_of_it)) == ["tool_call", "tool_result", "reply"]
    assert "went on" in _answer(rest_of_it)
    assert _state(rest_of_it[-1]) == TaskState.TASK_STATE_COMPLETED


async def test_an_a2a_0_3_client_streams_a_task_too(stack: LocalStack) -> None:
    async with httpx.AsyncClient(timeout=120) as http:
        card = await A2ACardResolver(http, stack.gateway_url).get_agent_card()
        legacy = CompatJsonRpcTransport(http, card, f"{stack.gateway_url}/v1/a2a")
        key = ClientCallContext(service_parameters={"Authorization": f"Bearer {KEY}"})
        request = _request("```python\nprint(6 * 7)\n```", context_id="a2a-legacy")
        events = [e async for e in legacy.send_message_streaming(request, context=key)]
    assert _task_id(events).startswith("task_")
    assert _kinds(_transcript(events)) == list(TRANSCRIPT)
    assert "42" in _answer(events)
    assert _state(events[-1]) == TaskState.TASK_STATE_COMPLETED


def _push_config(receiver: HookReceiver, token: str) -> TaskPushNotificationConfig:
    auth = AuthenticationInfo(scheme="Bearer", credentials="receiver-secret")
    return TaskPushNotificationConfig(url=receiver.url, token=token, authentication=auth)


def _told(secret: str, delivery: tuple[dict[str, str], bytes], token: str) -> StreamResponse:
    """A push notification checked as a receiver should: signed, with the asked headers."""
    headers, body = delivery
    verify(secret, headers, body)
    assert headers["x-a2a-notification-token"] == token
    assert headers["authorization"] == "Bearer receiver-secret"
    return parse_lenient(json.loads(body), StreamResponse())


async def test_push_notifications_are_signed_webhooks_in_a2a_s_format(
    stack: LocalStack, rest: TaskyardClient, receiver: HookReceiver
) -> None:
    secret = rest.webhook_secret()
    async with _a2a(stack) as client:
        # Asked for with the message: told of the end.
        pushed = _push_config(receiver, "tok-sent")
        request = _request("```python\nprint(1)\n```", context_id="a2a-push",
                           task_push_notification_config=pushed)  # fmt: skip
        sent = [e async for e in client.send_message(request)]
        (delivery,) = receiver.wait_for(1)
        update = _told(secret, delivery, "tok-sent").status_update
        assert (update.task_id, update.context_id) == (_task_id(sent), "a2a-push")
        assert update.status.state == TaskState.TASK_STATE_COMPLETED
        # Set on a task that runs (its model held): told of what follows.
        configure_model(stack, hold_until=1000)
        try:
            held = await _sent_now(stack, _request("```python\nprint(2)\n```"))
            asked = _push_config(receiver, "tok-set")
            asked.task_id = held.id
            made = await client.create_task_push_notification_config(asked)
            assert (made.task_id, made.url, made.token) == (held.id, receiver.url, "tok-set")
        finally:
            configure_model(stack, hold_until=None)
        _, delivery = receiver.wait_for(2)
        update = _told(secret, delivery, "tok-set").status_update
        assert update.task_id == held.id
        assert update.status.state == TaskState.TASK_STATE_COMPLETED
    assert len(receiver.received) == 2  # only the ends: no delivery per step


async def _sent_now(stack: LocalStack, request: SendMessageRequest) -> Task:
    """The task a message starts, as it stands (`SendMessage`, `returnImmediately`)."""
    request.configuration.return_immediately = True
    async with _a2a(stack, streaming=False) as plain:
        (answer,) = [event async for event in plain.send_message(request)]
    return answer.task


async def test_the_tenants_key_is_asked_for_and_scopes_the_tasks(stack: LocalStack) -> None:
    for key in (None, "not-a-key"):
        async with _a2a(stack, key) as client:
            with pytest.raises(A2AClientError, match="401"):
                [e async for e in client.send_message(_request("hi"))]
    async with _a2a(stack) as client:
        mine = _task_id([e async for e in client.send_message(_request("hi"))])
    async with _a2a(stack, OTHER_KEY) as theirs:
        with pytest.raises(TaskNotFoundError):
            await theirs.get_task(GetTaskRequest(id=mine))
        with pytest.raises(TaskNotFoundError):
            await theirs.cancel_task(CancelTaskRequest(id=mine))


def _rpc(stack: LocalStack, body: bytes | dict[str, Any], key: str = KEY) -> dict[str, Any]:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {"authorization": f"Bearer {key}", "a2a-version": "1.0",
               "content-type": "application/json"}  # fmt: skip
    answer = httpx.post(f"{stack.gateway_url}/v1/a2a", content=content, headers=headers)
    assert answer.status_code == 200, answer.text  # JSON-RPC's errors ride in the body
    reply: dict[str, Any] = answer.json()
    return reply


def _call(method: str, params: object, version: str = "2.0") -> dict[str, Any]:
    return {"jsonrpc": version, "id": uuid.uuid4().hex, "method": method, "params": params}


BAD_MESSAGE = {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}],
               "contextId": "no spaces in a session id"}  # fmt: skip


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (_call("NoSuchMethod", {}), -32601),  # method not found
        (_call("SendMessage", {"message": "not an object"}), -32602),  # invalid params
        (_call("SendMessage", {"message": BAD_MESSAGE}), -32602),  # a context id unlike ours
        (_call("GetTask", {"id": "task_" + "0" * 32}), -32001),  # task not found
        (_call("GetTask", {}, version="1.0"), -32600),  # invalid request
        (b"{not json", -32700),  # parse error
    ],
)
def test_a_bad_call_gets_json_rpc_s_error(
    stack: LocalStack, body: bytes | dict[str, Any], code: int
) -> None:
    reply = _rpc(stack, body)
    assert reply["error"]["code"] == code, reply
    assert "result" not in reply


# docs/api.md's A2A examples: its curl commands, its SDK example.
DOCS = (Path(__file__).resolve().parents[2] / "docs" / "api.md").read_text()
A2A_DOCS = DOCS.split("\n## A2A\n", 1)[1].split("\n## ", 1)[0]
CURL, SDK = re.findall(r"```(?:python)?\n(.*?)```", A2A_DOCS, re.DOTALL)[:2]


def _curl(stack: LocalStack, command: str) -> str:
    address = stack.gateway_url.removeprefix("http://")
    done = subprocess.run(["bash", "-c", command.replace("localhost:8000", address)],
                          capture_output=True, text=True, timeout=120, check=True)  # fmt: skip
    return done.stdout


def test_the_docs_curl_examples_run_as_written(stack: LocalStack) -> None:
    card, send, stream, get = re.split(r"\n(?=curl )", CURL.strip())
    assert json.loads(_curl(stack, card))["name"] == "taskyard"
    task = json.loads(_curl(stack, send))["result"]["task"]
    assert task["contextId"] == "a2a-s1"
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    (answer,) = [a for a in task["artifacts"] if a["name"] == "answer"]
    assert "42" in answer["parts"][0]["text"]
    lines = _curl(stack, stream).splitlines()
    events = [json.loads(line[5:])["result"] for line in lines if line.startswith("data:")]
    assert events[0]["task"]["contextId"] == "a2a-s1"  # the same session, a new task
    assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    told = [e["artifactUpdate"]["artifact"]["parts"][0]["text"] for e in events
            if "artifactUpdate" in e]  # fmt: skip
    assert any("56" in text for text in told)
    got = json.loads(_curl(stack, get.replace("<id>", task["id"])))["result"]
    assert got["id"] == task["id"] and len(got["history"]) == len(TRANSCRIPT)


def test_the_docs_sdk_example_runs_as_written(stack: LocalStack) -> None:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        source = SDK.replace("http://127.0.0.1:8000", stack.gateway_url)
        exec(compile(source, "docs/api.md", "exec"), {"__name__": "docs"})
    lines = printed.getvalue().splitlines()
    assert lines[0].startswith("task ")
    assert any(line.startswith("artifact_update ") and str(2**100) in line for line in lines)
    assert lines[-1].startswith("status_update")
