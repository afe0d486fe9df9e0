"""`BaseAction`: a tool the agent can call, with one API (``run``) or several (a toolkit)."""

from __future__ import annotations

import asyncio
import inspect
import json
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from pydantic import ValidationError

from taskyard.agentkit.actions.api import ToolApi, describe_api, is_tool_api
from taskyard.agentkit.actions.cells import CellLog
from taskyard.agentkit.actions.docstrings import parse_docstring
from taskyard.agentkit.schema import ActionReturn, ActionStatusCode
from taskyard.errors import TaskyardError
from taskyard.plumbing.settings import ToolWorkerSettings
from taskyard.sandbox import SandboxProvider

__all__ = ["ActionError", "ActionResources", "BaseAction", "text_result"]


class ActionError(TaskyardError):
    """Raised by a tool for a failure the model should read: the message goes back as is."""

    def __init__(self, message: str, state: ActionStatusCode = ActionStatusCode.API_ERROR) -> None:
        super().__init__(message)
        self.state = state


@dataclass(frozen=True)
class ActionResources:
    """What actions may need from the process that hosts them, handed in at build time."""

    settings: ToolWorkerSettings
    sandboxes: SandboxProvider | None = None
    cells: CellLog | None = None  # where interpreter cells are kept for a replay, if anywhere


class BaseAction:
    """A tool. Subclasses define ``run`` (a single-API action) or `tool_api` methods (a toolkit).

    Each API's arguments come from its type hints and docstring. An API that declares a
    ``session_id`` parameter receives the caller's session key (to keep per-session state);
    the model cannot set it. The class docstring's summary is the tool's description.
    """

    name: ClassVar[str] = "BaseAction"
    description: ClassVar[str] = ""
    apis: ClassVar[dict[str, ToolApi]] = {}
    # True for a tool whose state lives in the session's sandbox on the tool worker that holds
    # it (an interpreter): its calls are routed to that worker. False: any worker of the pool.
    session_bound: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.name = cls.__dict__.get("name", cls.__name__)
        cls.description = parse_docstring(cls.__doc__).summary
        cls.apis = _collect_apis(cls)

    @classmethod
    def build(cls, resources: ActionResources) -> Self:
        """Make the action for a host process; override when it needs `resources`."""
        return cls()

    @classmethod
    def is_toolkit(cls) -> bool:
        return "run" not in cls.apis

    @classmethod
    def function_name(cls, api: str) -> str:
        """The name the model calls: ``Tool`` for ``run``, ``Tool.api`` in a toolkit."""
        return cls.name if api == "run" else f"{cls.name}.{api}"

    @classmethod
    def tool_schemas(cls) -> list[dict[str, Any]]:
        """OpenAI ``tools`` entries, one per API."""
        return [
            {
                "type": "function",
                "function": {
                    "name": cls.function_name(api.method),
                    "description": cls._describe(api),
                    "parameters": api.json_schema(),
                },
            }
            for api in cls.apis.values()
        ]

    @classmethod
    def _describe(cls, api: ToolApi) -> str:
        # A single-API tool is described by its class; a toolkit's APIs by their own docs.
        first, second = (cls.description, api.description)
        if api.method != "run":
            first, second = second, first
        return first or second

    async def acall(
        self, api: str, arguments: dict[str, Any], session_id: str, *, offload: bool = True
    ) -> ActionReturn:
        """Validate `arguments`, run the API, and report any failure as an `ActionReturn`.

        A blocking (non-async) API runs in a worker thread when `offload` is true, so the event
        loop keeps serving other calls; a caller whose loop serves only this call passes False
        and the API runs in the caller's own thread.
        """
        spec = self.apis.get(api)
        call_name = self.function_name(api)
        if spec is None:
            known = ", ".join(self.function_name(a) for a in self.apis) or "none"
            return _failed(
                call_name,
                arguments,
                ActionStatusCode.API_ERROR,
                f"{self.name} has no API {api!r} (it has: {known})",
            )
        try:
            parsed = spec.arguments.model_validate(arguments)
        except ValidationError as exc:
            return _failed(
                call_name,
                arguments,
                ActionStatusCode.ARGS_ERROR,
                f"bad arguments for {call_name}: {_reasons(exc)}",
            )
        kwargs = {field: getattr(parsed, field) for field in type(parsed).model_fields}
        if spec.wants_session:
            kwargs["session_id"] = session_id
        try:
            outputs = await _invoke(getattr(self, spec.method), kwargs, offload)
        except ActionError as exc:
            return _failed(call_name, arguments, exc.state, str(exc))
        except Exception as exc:  # a tool's bug is reported to the model, never raised
            return _failed(
                call_name,
                arguments,
                ActionStatusCode.API_ERROR,
                f"{call_name} failed: {type(exc).__name__}: {exc}",
            )
        return _to_return(call_name, arguments, outputs)


def text_result(text: str) -> list[dict[str, Any]]:
    """An `ActionReturn.result` holding one text part."""
    return [{"type": "text", "content": text}]


def _collect_apis(cls: type[BaseAction]) -> dict[str, ToolApi]:
    marked = [name for name in dir(cls) if name != "run" and is_tool_api(getattr(cls, name))]
    has_run = callable(getattr(cls, "run", None))
    if marked and has_run:
        raise TypeError(f"{cls.__name__}: `run` and other tool APIs cannot be mixed")
    names = ["run"] if has_run else marked
    return {name: describe_api(cls.__name__, getattr(cls, name)) for name in names}


async def _invoke(method: Any, kwargs: dict[str, Any], offload: bool) -> Any:
    if inspect.iscoroutinefunction(method):
        return await method(**kwargs)
    return await asyncio.to_thread(method, **kwargs) if offload else method(**kwargs)


def _to_return(call_name: str, arguments: dict[str, Any], outputs: Any) -> ActionReturn:
    if isinstance(outputs, ActionReturn):
        update = {"type": outputs.type or call_name, "args": outputs.args or arguments}
        return outputs.model_copy(update=update)
    if outputs is None:
        result: list[dict[str, Any]] = []
    elif isinstance(outputs, str):
        result = text_result(outputs)
    else:
        result = text_result(json.dumps(outputs, ensure_ascii=False, default=str))
    return ActionReturn(type=call_name, args=arguments, result=result)


def _failed(
    call_name: str, arguments: dict[str, Any], state: ActionStatusCode, errmsg: str
) -> ActionReturn:
    return ActionReturn(type=call_name, args=arguments, state=state, errmsg=errmsg)


def _reasons(exc: ValidationError) -> str:
    return "; ".join(_reason(err) for err in exc.errors())


def _reason(err: Any) -> str:
    where = ".".join(map(str, err["loc"])) or "arguments"
    if err["type"] == "missing":
        return f"missing required argument {where!r}"
    if err["type"] == "extra_forbidden":
        return f"unknown argument {where!r}"
    return f"{where}: {err['msg'].lower()} (got {err['input']!r})"
