"""Registries: user code (agents, actions, ...) found by name, instead of if/elif over kinds.

Workers import the modules named in `settings.plugin_modules` at start-up; importing a module runs
its `@registry.register` decorators, so a user's agent or action is deployable by configuration.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from taskyard.errors import TaskyardError

__all__ = ["Registry", "RegistryError", "load_plugins"]

T = TypeVar("T")


class RegistryError(TaskyardError, LookupError):
    """A name that nothing registered."""


def _name_of(item: object) -> str:
    named = getattr(item, "__name__", None)
    if not isinstance(named, str):
        raise TypeError(f"{item!r} has no __name__: register it with a name")
    return named


class Registry(Generic[T]):
    """Named things of one kind (agent classes, action classes, ...)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str | None = None) -> Callable[[T], T]:
        """Decorator: `@agents.register()` registers under the object's `__name__`."""

        def add(item: T) -> T:
            self.add(name or _name_of(item), item)
            return item

        return add

    def add(self, name: str, item: T) -> None:
        self._items[name] = item

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            known = ", ".join(sorted(self._items)) or "none"
            raise RegistryError(f"unknown {self.kind} {name!r} (registered: {known})") from None

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._items))


def load_plugins(modules: str) -> None:
    """Import each comma-separated module so its registrations take effect."""
    for name in filter(None, (m.strip() for m in modules.split(","))):
        importlib.import_module(name)
