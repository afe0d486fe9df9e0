"""The action registry: actions found by name, so a user's action deploys by configuration."""

from __future__ import annotations

from typing import Any, TypeVar

from taskyard.agentkit.actions.base import ActionResources, BaseAction
from taskyard.agentkit.registry import Registry, RegistryError
from taskyard.plumbing.keys import tool_queue

__all__ = [
    "ACTIONS",
    "action_queue",
    "build_actions",
    "openai_tool_schemas",
    "register_action",
    "session_bound",
    "split_call_name",
    "tool_names",
]

ACTIONS: Registry[type[BaseAction]] = Registry("action")

A = TypeVar("A", bound=type[BaseAction])


def register_action(cls: A) -> A:
    """Class decorator: register the action under its `name`."""
    ACTIONS.add(cls.name, cls)
    return cls


def split_call_name(name: str) -> tuple[str, str | None]:
    """``"Toolkit.api"`` to ``("Toolkit", "api")``; ``"Tool"`` to ``("Tool", None)``."""
    tool, _, api = name.partition(".")
    return tool, api or None


def action_queue(call_name: str) -> str:
    """The Celery queue a call runs on: one queue per tool, toolkit APIs included."""
    return tool_queue(split_call_name(call_name)[0])


def session_bound(call_name: str) -> bool:
    """Whether the call's tool keeps its state in the session's sandbox on one tool worker
    (`BaseAction.session_bound`); an unknown tool is not."""
    tool = split_call_name(call_name)[0]
    return tool in ACTIONS and ACTIONS.get(tool).session_bound


def openai_tool_schemas(names: list[str]) -> list[dict[str, Any]]:
    """OpenAI ``tools`` entries for registered actions (a toolkit gives one per API).

    A name may also pick a single API of a toolkit (``"WebBrowser.search"``). An unknown
    name raises `RegistryError`.
    """
    schemas = []
    for name in names:
        tool, api = split_call_name(name)
        entries = ACTIONS.get(tool).tool_schemas()
        if api is not None:
            entries = [e for e in entries if e["function"]["name"] == name]
            if not entries:
                raise RegistryError(f"action {tool!r} has no API {api!r}")
        schemas.extend(entries)
    return schemas


def tool_names() -> list[str]:
    """Every name a task's tools may list: each registered action, and each toolkit's APIs."""
    apis = (e["function"]["name"] for name in ACTIONS for e in ACTIONS.get(name).tool_schemas())
    return sorted({*ACTIONS, *apis})


def build_actions(names: list[str] | None, resources: ActionResources) -> list[BaseAction]:
    """Instances of the named registered actions (all of them when `names` is None)."""
    chosen = list(ACTIONS) if names is None else [split_call_name(n)[0] for n in names]
    return [ACTIONS.get(name).build(resources) for name in dict.fromkeys(chosen)]
