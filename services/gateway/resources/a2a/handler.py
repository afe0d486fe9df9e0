"""A2A's operations on taskyard's tasks: the SDK's `RequestHandler`, backed by the store.

The SDK's JSON-RPC dispatcher parses requests, answers errors and writes server-sent events;
this answers each operation from taskyard's own records. Nothing is kept here: a task is the
taskyard task (its id is the A2A task id), its events are the stream, a context is a session.

- A message submits a task (`POST /v1/tasks`, the same code): its text and data parts are
  the input, its contextId the session (a new one if absent), its messageId the idempotency
  key (a message sent again is the same task). A blocking send waits until the task ends or
  waits for a person.
- A stream (and a subscription) starts with the task as it stands and then follows the
  task's event stream from exactly there, until the task ends or comes to wait for a person:
  a client that lost its stream, or has acted, subscribes again and misses nothing, nor sees
  anything twice.
- Cancel is taskyard's cancel; push configs are the task's webhook (`push`).
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import AsyncGenerator, Awaitable, Callable, Coroutine
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from a2a.server.context import ServerCallContext
from a2a.server.events.event_queue import Event as A2AEvent
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    ExtendedAgentCardNotConfiguredError,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    InternalError,
    InvalidParamsError,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskNotCancelableError,
    TaskNotFoundError,
    TaskPushNotificationConfig,
    UnsupportedOperationError,
)
from a2a.utils.errors import A2AError
from a2a.utils.task import apply_history_length, validate_history_length
from celery import Celery
from pydantic import ValidationError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from starlette.exceptions import HTTPException

from services.gateway.event_hub import EventHub
from services.gateway.resources.a2a import push
from services.gateway.resources.a2a.mapping import TaskView, task_input
from services.gateway.resources.tasks.models import TaskAccepted, TaskCreate
from taskyard.agentkit.actions.web import AddressPolicy
from taskyard.agentkit.spec import AgentSpec, WebhookSpec
from taskyard.plumbing.keys import TASK_ID_PATTERN
from taskyard.plumbing.settings import GatewaySettings
from taskyard.runtime.cancel import cancel
from taskyard.runtime.events import decode_entry
from taskyard.runtime.store import NotReplicated, TaskStore
from taskyard.runtime.task import TaskRecord
from taskyard.runtime.webhooks import attach, detach, refusal

__all__ = ["Caller", "Submit", "TaskyardHandler"]

Submit = Callable[[TaskCreate, str | None], Awaitable[TaskAccepted]]
_TASK_ID = re.compile(TASK_ID_PATTERN)
_KEY_PREFIX = "a2a:"  # idempotency keys from messageIds: apart from the REST API's own
_MAX_MESSAGE_ID = 256 - len(_KEY_PREFIX)
# Where an invalid field of a submission came from, in the A2A request's words.
_FIELDS = {"input": "message.parts", "session_id": "message.contextId",
           "webhook": "configuration.taskPushNotificationConfig"}  # fmt: skip


_P = ParamSpec("_P")
_R = TypeVar("_R")
log = logging.getLogger("taskyard.gateway.a2a")


def _failure(exc: Exception) -> InternalError:
    """An exception other than A2A's own as the error the client gets: a store failure says
    what to do (nothing was done, or sent again it is not done twice); anything else is a
    bare internal error, logged here. Never the exception's text, which may name the store's
    address or the code's insides."""
    if isinstance(exc, NotReplicated):
        return InternalError(
            message=f"no replica confirmed the task within {exc.timeout_ms} ms, so it is not "
            "accepted (it may still run); send the message again with the same messageId"
        )
    if isinstance(exc, RedisConnectionError | RedisTimeoutError):
        return InternalError(
            message="the task store (Redis) does not answer; send the request again shortly "
            "(a message sent again with its messageId is never made twice)"
        )
    log.error("A2A call failed", exc_info=exc)
    return InternalError(message="internal error")


def _answering_failures(
    method: Callable[_P, Coroutine[Any, Any, _R]],
) -> Callable[_P, Coroutine[Any, Any, _R]]:
    @functools.wraps(method)
    async def answered(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return await method(*args, **kwargs)
        except A2AError:
            raise
        except Exception as exc:
            raise _failure(exc) from exc

    return answered


def _streaming_failures(
    method: Callable[_P, AsyncGenerator[A2AEvent]],
) -> Callable[_P, AsyncGenerator[A2AEvent]]:
    @functools.wraps(method)
    async def answered(*args: _P.args, **kwargs: _P.kwargs) -> AsyncGenerator[A2AEvent]:
        try:
            async with aclosing(method(*args, **kwargs)) as events:
                async for event in events:
                    yield event
        except A2AError:
            raise
        except Exception as exc:
            raise _failure(exc) from exc

    return answered


@dataclass(frozen=True, slots=True)
class Caller:
    """Who called, through which agent's endpoint, and how to submit a task for them."""

    tenant: str
    agent: str | None  # a registered agent's name; None: the default agent
    base_url: str  # the gateway's, as the client reached it
    submit: Submit


class TaskyardHandler(RequestHandler):
    """The A2A operations of one request's caller."""

    def __init__(
        self,
        caller: Caller,
        store: TaskStore,
        hub: EventHub,
        celery: Celery,
        settings: GatewaySettings,
    ) -> None:
        self.caller = caller
        self.store = store
        self.hub = hub
        self.celery = celery
        self.settings = settings

    # -- messages ----------------------------------------------------------------------------

    @_answering_failures
    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Task | Message:
        validate_history_length(params.configuration)
        view = self._view(await self._submit(params))
        if params.configuration.return_immediately:
            await self._fold(view)
        else:
            async with aclosing(self._updates(view)) as updates:
                async for _ in updates:
                    if view.settled:
                        break
        return apply_history_length(view.task(), params.configuration)

    @_streaming_failures
    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[A2AEvent]:
        view = self._view(await self._submit(params))
        async with aclosing(self._updates(view)) as updates:
            async for update in updates:
                yield update

    @_streaming_failures
    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[A2AEvent]:
        record = await self._owned(params.id)
        if record.terminal:
            raise UnsupportedOperationError(message=f"the task has ended ({record.status})")
        async with aclosing(self._updates(self._view(record))) as updates:
            async for update in updates:
                yield update

    # -- tasks -------------------------------------------------------------------------------

    @_answering_failures
    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task:
        validate_history_length(params)
        view = self._view(await self._owned(params.id))
        await self._fold(view)
        return apply_history_length(view.task(), params)

    @_answering_failures
    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task:
        record = await self._owned(params.id)
        if not await cancel(self.store, self.celery, record, "cancelled by the client (A2A)"):
            now = await self.store.get(record.id) or record
            raise TaskNotCancelableError(message=f"the task has ended ({now.status})")
        view = self._view(record)
        await self._fold(view)
        return view.task()

    async def on_list_tasks(
        self, params: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse:
        raise UnsupportedOperationError(message="list tasks with GET /v1/tasks")

    # -- push notifications ------------------------------------------------------------------

    @_answering_failures
    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        record = await self._owned(params.task_id)
        if record.terminal:
            raise UnsupportedOperationError(message=f"the task has ended ({record.status})")
        try:
            spec = WebhookSpec.model_validate(push.webhook_of(params))
        except ValidationError as exc:
            raise InvalidParamsError(message=_invalid(exc)) from exc
        await self._check_address(spec.url)
        if not await attach(self.store, self.celery, record, spec):
            raise UnsupportedOperationError(message="the task has ended")
        return push.config_of(record.id, spec)

    @_answering_failures
    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        record = await self._owned(params.task_id)
        if record.webhook is None or not push.is_config(record.id, record.webhook, params.id):
            raise TaskNotFoundError(message="no such push notification config")
        return push.config_of(record.id, record.webhook)

    @_answering_failures
    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        record = await self._owned(params.task_id)
        found = (
            [record.webhook] if record.webhook and push.is_config(record.id, record.webhook) else []
        )
        return ListTaskPushNotificationConfigsResponse(
            configs=[push.config_of(record.id, spec) for spec in found]
        )

    @_answering_failures
    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        record = await self._owned(params.task_id)
        if push.is_config(record.id, record.webhook, params.id):
            await detach(self.store, record.id)

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        raise ExtendedAgentCardNotConfiguredError(message="the public card is the whole card")

    # -- the parts they share ----------------------------------------------------------------

    def _view(self, record: TaskRecord) -> TaskView:
        return TaskView(record.id, record.session_id, self.caller.base_url)

    async def _fold(self, view: TaskView) -> str:
        """Fold in the task's events so far; the last one's id ("0-0": none yet)."""
        events = await self.store.events(view.task_id)
        for event in events:
            view.add(event)
        return events[-1].id if events else "0-0"

    async def _updates(self, view: TaskView) -> AsyncGenerator[A2AEvent]:
        """The task as it stands, then every update after that until the task ends or comes
        to wait for a person (as A2A's streams end: the client subscribes again once it has
        acted; a task waiting already when the stream starts is followed past that)."""
        after = await self._fold(view)
        yield view.task()
        if view.ended:
            return
        async with aclosing(self.hub.follow(view.task_id, after)) as batches:
            async for batch in batches:
                for entry_id, fields in batch.entries:
                    before = view.status.state
                    for update in view.add(decode_entry(entry_id, fields)):
                        yield update
                    if view.ended or (view.settled and view.status.state != before):
                        return

    async def _owned(self, task_id: str) -> TaskRecord:
        """The caller's task `task_id`; anything else is the same "not found"."""
        record = await self.store.get(task_id) if _TASK_ID.fullmatch(task_id) else None
        if record is None or record.tenant != self.caller.tenant:
            raise TaskNotFoundError(message=f"no such task: {task_id[:100]}")
        return record

    async def _submit(self, params: SendMessageRequest) -> TaskRecord:
        """The task the message starts (or started already, sent again)."""
        message = params.message
        if message.task_id:
            await self._refuse_more_input(message.task_id)
        if not message.message_id or len(message.message_id) > _MAX_MESSAGE_ID:
            raise InvalidParamsError(message=f"messageId: 1 to {_MAX_MESSAGE_ID} characters")
        body = self._body(params, task_input(message))
        try:
            accepted = await self.caller.submit(body, _KEY_PREFIX + message.message_id)
        except HTTPException as exc:
            raise _refused(exc) from exc
        record = await self.store.get(accepted.id)
        if record is None:  # made and gone already: its key outlives it
            raise InternalError(message=f"task {accepted.id} is gone; send a new messageId")
        return record

    def _body(self, params: SendMessageRequest, text: str) -> TaskCreate:
        fields: dict[str, Any] = {
            "input": text,
            "session_id": params.message.context_id or None,
            "agent": AgentSpec(agent=self.caller.agent),
        }
        if params.configuration.HasField("task_push_notification_config"):
            fields["webhook"] = push.webhook_of(params.configuration.task_push_notification_config)
        try:
            return TaskCreate.model_validate(fields)
        except ValidationError as exc:
            raise InvalidParamsError(message=_invalid(exc)) from exc

    async def _refuse_more_input(self, task_id: str) -> None:
        record = await self._owned(task_id)
        why = "has ended" if record.terminal else "takes no input while it runs"
        raise UnsupportedOperationError(
            message=f"the task {why}; send the next message without a taskId, with contextId "
            f"{record.session_id!r}: it continues the same session"
        )

    async def _check_address(self, url: str) -> None:
        policy = AddressPolicy(allow_private=self.settings.webhook_allow_private)
        if why := await refusal(url, policy):
            raise InvalidParamsError(message=f"push notification url: {why}")


def _invalid(exc: ValidationError) -> str:
    """A validation failure in the A2A request's words."""
    return "; ".join(
        f"{_FIELDS.get(str(error['loc'][0]), str(error['loc'][0]))}: {error['msg']}"
        if error["loc"] else error["msg"]
        for error in exc.errors()
    )  # fmt: skip


def _refused(exc: HTTPException) -> InvalidParamsError | UnsupportedOperationError:
    """The submission's refusal (422, 409) as A2A's error."""
    detail = exc.detail
    text = "; ".join(str(d.get("msg", d)) for d in detail) if isinstance(detail, list) else detail
    if exc.status_code == 409:
        return UnsupportedOperationError(message=str(text))
    return InvalidParamsError(message=str(text))
