"""Executors: a tool-call message in, a result message out; a failure is a result, never raised.

The call is ``{"name": "Tool" | "Toolkit.api", "parameters": {...}, "id"?: ...}`` in the
message's content, or a `FunctionCall` / `ToolCall` object. The reply comes from the action
(sender = the action's name), holds an `ActionReturn`, and quotes ``tool_call_id`` when the
call had one.

`ActionHook`s run around each call, in registration order (``hooks=`` or `register_hook`);
their methods may be coroutine functions. A hook's falsy return keeps the message and an
`AgentMessage` replaces it; anything else, or a hook that raises, makes the reply an error.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterable
from typing import Any, Self

from taskyard.agentkit.actions.base import ActionResources, BaseAction
from taskyard.agentkit.actions.registry import build_actions, split_call_name
from taskyard.agentkit.hooks import ActionHook, RemovableHandle
from taskyard.agentkit.parsers.native import decode_arguments
from taskyard.agentkit.schema import (
    ActionReturn,
    ActionStatusCode,
    ActionValidCode,
    AgentMessage,
    FunctionCall,
)
from taskyard.agentkit.text import replace_lone_surrogates
from taskyard.errors import TaskyardError

__all__ = ["ActionExecutor", "AsyncActionExecutor"]

_SENDER = "ActionExecutor"  # the sender of replies to messages that named no tool


class _Refused(TaskyardError):
    """A call the executor cannot run; carries the reply that says why."""

    def __init__(self, sender: str, state: ActionStatusCode, errmsg: str, **fields: Any) -> None:
        super().__init__(errmsg)
        self.sender = sender
        self.ret = ActionReturn(state=state, errmsg=errmsg, **fields)


class AsyncActionExecutor:
    """Runs tool calls against a set of actions, with `ActionHook`s around each call."""

    def __init__(
        self,
        actions: Iterable[BaseAction],
        hooks: Iterable[ActionHook] = (),
        *,
        offload_blocking: bool = True,
    ) -> None:
        self.actions = {action.name: action for action in actions}
        self._hooks: dict[int, ActionHook] = {}
        for hook in hooks:
            self.register_hook(hook)
        # Blocking actions run in worker threads so the loop stays free (see BaseAction.acall).
        self.offload_blocking = offload_blocking

    def register_hook(self, hook: ActionHook) -> RemovableHandle:
        """Run `hook` around every call; the handle removes it. Only `ActionHook`s are taken."""
        if not isinstance(hook, ActionHook):
            hint = (
                "; an agent Hook goes to an agent's register_hook" if _is_agent_hook(hook) else ""
            )
            raise TypeError(
                f"executors take ActionHook objects (before_action, after_action), "
                f"not {type(hook).__name__}{hint}"
            )
        handle = RemovableHandle(self._hooks)
        self._hooks[handle.id] = hook
        return handle

    @classmethod
    def from_registry(
        cls,
        resources: ActionResources,
        names: list[str] | None = None,
        hooks: Iterable[ActionHook] = (),
    ) -> Self:
        """An executor over the named registered actions (all of them by default)."""
        return cls(build_actions(names, resources), hooks)

    def tool_schemas(self) -> list[dict[str, Any]]:
        """OpenAI ``tools`` entries for every action this executor runs."""
        return [schema for action in self.actions.values() for schema in action.tool_schemas()]

    async def __call__(
        self, message: AgentMessage | FunctionCall, session_id: str = "default"
    ) -> AgentMessage:
        """Run the call in `message` for the session `session_id`."""
        message = _as_message(message)
        try:
            message = await self._hooked("before_action", message, session_id)
            reply = await self._execute(message, session_id)
            return await self._hooked("after_action", reply, session_id)
        except Exception as exc:  # a broken hook must still answer the call
            ret = ActionReturn(
                state=ActionStatusCode.API_ERROR, errmsg=f"action hook failed: {exc!r}"
            )
            return _reply(_SENDER, ret, _call_id(message))

    async def _hooked(self, method: str, message: AgentMessage, session_id: str) -> AgentMessage:
        for hook in list(self._hooks.values()):
            result = getattr(hook, method)(self, message, session_id)
            if inspect.isawaitable(result):
                result = await result
            message = _replaced(result, message, method)
        return message

    async def _execute(self, message: AgentMessage, session_id: str) -> AgentMessage:
        call_id = _call_id(message)
        try:
            name, parameters = _read_call(message)
            action, api = self._resolve(name)
            arguments = _arguments(parameters, sender=action.name, call_name=name)
        except _Refused as refused:
            return _reply(refused.sender, refused.ret, call_id)
        ret = await action.acall(api, arguments, session_id, offload=self.offload_blocking)
        return _reply(action.name, ret, call_id)

    def _resolve(self, name: str) -> tuple[BaseAction, str]:
        tool, api = split_call_name(name)
        action = self.actions.get(tool)
        if action is None:
            known = ", ".join(sorted(self.actions)) or "none"
            raise _Refused(
                name,
                ActionStatusCode.API_ERROR,
                f"unknown tool {name!r} (available: {known})",
                type=name,
                valid=ActionValidCode.INVALID,
            )
        if api is None and action.is_toolkit():
            apis = ", ".join(action.function_name(a) for a in action.apis)
            raise _Refused(
                name,
                ActionStatusCode.API_ERROR,
                f"{name} is a toolkit: call one of {apis}",
                type=name,
            )
        return action, api or "run"


class ActionExecutor:
    """The blocking form of `AsyncActionExecutor`, for callers without a running event loop
    (a Celery task, a script). Each call runs the async core to completion."""

    def __init__(self, actions: Iterable[BaseAction], hooks: Iterable[ActionHook] = ()) -> None:
        # The loop of each call serves that call alone, so blocking actions run right in the
        # caller's thread: a sandbox kernel started from a throwaway thread could die with it.
        self.core = AsyncActionExecutor(actions, hooks, offload_blocking=False)

    @classmethod
    def from_registry(
        cls,
        resources: ActionResources,
        names: list[str] | None = None,
        hooks: Iterable[ActionHook] = (),
    ) -> Self:
        """An executor over the named registered actions (all of them by default)."""
        return cls(build_actions(names, resources), hooks)

    @property
    def actions(self) -> dict[str, BaseAction]:
        return self.core.actions

    def register_hook(self, hook: ActionHook) -> RemovableHandle:
        """Run `hook` around every call; the handle removes it. Only `ActionHook`s are taken."""
        return self.core.register_hook(hook)

    def tool_schemas(self) -> list[dict[str, Any]]:
        """OpenAI ``tools`` entries for every action this executor runs."""
        return self.core.tool_schemas()

    def __call__(
        self, message: AgentMessage | FunctionCall, session_id: str = "default"
    ) -> AgentMessage:
        """Run the call in `message` for the session `session_id`."""
        return asyncio.run(self.core(message, session_id))


def _replaced(value: Any, message: AgentMessage, method: str) -> AgentMessage:
    # As for agent hooks (Lagent's rule): falsy keeps the message, a message replaces it.
    if not value:
        return message
    if isinstance(value, AgentMessage):
        return value
    raise TypeError(
        f"{method} returns an AgentMessage, or a falsy value to keep the message; "
        f"it returned {value!r:.80}"
    )


def _is_agent_hook(hook: Any) -> bool:
    return hasattr(hook, "before_agent") or hasattr(hook, "after_agent")


def _as_message(message: AgentMessage | FunctionCall) -> AgentMessage:
    if isinstance(message, FunctionCall):
        return AgentMessage(content=message.model_dump())
    return message


def _call_id(message: AgentMessage) -> str | None:
    content = message.content
    if isinstance(content, dict) and isinstance(call_id := content.get("id"), str):
        return call_id
    return message.tool_call_id


def _read_call(message: AgentMessage) -> tuple[str, Any]:
    content = message.content
    if not (isinstance(content, dict) and isinstance(content.get("name"), str)):
        raise _Refused(
            _SENDER,
            ActionStatusCode.ARGS_ERROR,
            f'no tool call to run: expected {{"name": ..., "parameters": {{...}}}}, '
            f"got {_preview(content)}",
        )
    return content["name"], content.get("parameters", {})


def _arguments(parameters: Any, sender: str, call_name: str) -> dict[str, Any]:
    if isinstance(parameters, str):
        parameters, error = decode_arguments(parameters)
        if error:
            raise _Refused(sender, ActionStatusCode.ARGS_ERROR, error, type=call_name)
    if not isinstance(parameters, dict):
        raise _Refused(
            sender,
            ActionStatusCode.ARGS_ERROR,
            f"parameters must be a JSON object, got {_preview(parameters)}",
            type=call_name,
        )
    return parameters


def _reply(sender: str, ret: ActionReturn, call_id: str | None) -> AgentMessage:
    extra = {"tool_call_id": call_id} if call_id else None
    # Tool output is outside text (sandboxed code prints what it likes): a lone surrogate in
    # it could not be stored.
    storable = ret.model_copy(update=replace_lone_surrogates(dict(ret)))
    return AgentMessage(sender=sender, content=storable, extra_info=extra)


def _preview(value: Any, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."
