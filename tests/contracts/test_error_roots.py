"""One error root per package: every exception class a package defines derives from it, and
every root from `taskyard.errors.TaskyardError`."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import sys
from pathlib import Path

import pytest

from taskyard.errors import TaskyardError

# Package: its root, by dotted name. The lead adds services.llm_proxy and
# devstack.scripted_model here once their errors derive from one root each.
ROOTS = {
    "taskyard": "taskyard.errors.TaskyardError",
    "services.gateway": "services.gateway.errors.GatewayError",
    "services.agent_worker": "services.agent_worker.errors.AgentWorkerError",
    "services.tool_worker": "services.tool_worker.errors.ToolWorkerError",
    "services.llm_proxy": "services.llm_proxy.errors.ProxyError",
    "devstack.scripted_model": "devstack.scripted_model.app.ScriptedModelError",
}
# The sandbox kernel runs alone inside the sandbox, on the standard library: it cannot import
# taskyard.errors, and its errors never leave it. `__main__` modules run when imported.
SKIPPED = ("taskyard.sandbox.kernel",)


def _root(dotted: str) -> type[BaseException]:
    module, name = dotted.rsplit(".", 1)
    root: type[BaseException] = getattr(importlib.import_module(module), name)
    return root


def _modules(package: str) -> list[str]:
    paths = importlib.import_module(package).__path__
    names = [package, *(m.name for m in pkgutil.walk_packages(paths, f"{package}."))]
    return [n for n in names if not n.startswith(SKIPPED) and not n.endswith(".__main__")]


def strays(package: str, root: type[BaseException]) -> list[str]:
    """The exception classes `package`'s modules define that do not derive from `root`
    (warnings are no errors, and are left out)."""
    found = []
    for name in _modules(package):
        for cls in vars(importlib.import_module(name)).values():
            if (
                inspect.isclass(cls)
                and cls.__module__ == name
                and issubclass(cls, BaseException)
                and not issubclass(cls, (Warning, root))
            ):
                found.append(f"{name}.{cls.__qualname__}")
    return sorted(found)


@pytest.mark.parametrize("package", sorted(ROOTS))
def test_every_error_derives_from_the_package_root(package: str) -> None:
    root = _root(ROOTS[package])
    assert issubclass(root, TaskyardError)
    assert strays(package, root) == []


def test_a_stray_error_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "planted"
    (package / "inner").mkdir(parents=True)
    (package / "__init__.py").write_text("class PlantedError(Exception): ...\n")
    (package / "inner" / "__init__.py").write_text("")
    (package / "inner" / "deep.py").write_text(
        "from planted import PlantedError\n\n"
        "class Fine(PlantedError): ...\n"
        "class Stray(ValueError): ...\n"
        "class Noted(UserWarning): ...\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert strays("planted", _root("planted.PlantedError")) == ["planted.inner.deep.Stray"]
    finally:
        for name in [n for n in sys.modules if n.split(".")[0] == "planted"]:
            del sys.modules[name]
