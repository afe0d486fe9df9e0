import sys
from pathlib import Path

import pytest

from taskyard.agentkit.actions import (
    ACTIONS,
    ActionResources,
    FinishAction,
    IPythonInterpreter,
    WebBrowser,
    action_queue,
    build_actions,
    openai_tool_schemas,
    tool_names,
)
from taskyard.agentkit.actions.web import RedisResultStore
from taskyard.agentkit.registry import RegistryError, load_plugins
from taskyard.plumbing.settings import ToolWorkerSettings
from taskyard.sandbox import SandboxProvider


def names(schemas: list[dict]) -> list[str]:
    return [s["function"]["name"] for s in schemas]


def test_builtins_are_registered() -> None:
    assert {"IPythonInterpreter", "WebBrowser", "FinishAction"} <= set(ACTIONS)
    assert ACTIONS.get("WebBrowser") is WebBrowser


def test_openai_tool_schemas_for_tools_and_toolkits() -> None:
    schemas = openai_tool_schemas(["IPythonInterpreter", "WebBrowser"])
    assert names(schemas) == [
        "IPythonInterpreter",
        "WebBrowser.open",
        "WebBrowser.search",
        "WebBrowser.select",
    ]
    assert all(s["type"] == "function" for s in schemas)
    ipython = schemas[0]["function"]
    assert ipython["parameters"]["required"] == ["command"]
    assert ipython["parameters"]["properties"]["command"]["type"] == "string"
    assert "stateful" in ipython["description"]


def test_one_api_of_a_toolkit_can_be_chosen_and_unknown_names_raise() -> None:
    assert names(openai_tool_schemas(["WebBrowser.search"])) == ["WebBrowser.search"]
    with pytest.raises(RegistryError, match="unknown action 'Calendar'"):
        openai_tool_schemas(["Calendar"])
    with pytest.raises(RegistryError, match="no API 'delete'"):
        openai_tool_schemas(["WebBrowser.delete"])


def test_tool_names_are_every_name_a_task_may_list() -> None:
    names = tool_names()
    assert {"IPythonInterpreter", "WebBrowser", "WebBrowser.search"} <= set(names)
    assert len(openai_tool_schemas(names)) >= len(names)  # each one accepted


def test_a_toolkit_call_runs_on_its_toolkit_queue() -> None:
    assert action_queue("WebBrowser.search") == "tools.WebBrowser"
    assert action_queue("IPythonInterpreter") == "tools.IPythonInterpreter"


def test_build_actions_hands_resources_to_the_actions(local_sandboxes: SandboxProvider) -> None:
    settings = ToolWorkerSettings(search_url="http://127.0.0.1:9/", sandbox_timeout_s=7)
    resources = ActionResources(settings=settings, sandboxes=local_sandboxes)
    ipython, browser, finish = build_actions(
        ["IPythonInterpreter", "WebBrowser.search", "WebBrowser.open", "FinishAction"], resources
    )
    assert isinstance(ipython, IPythonInterpreter) and ipython.sandboxes is local_sandboxes
    assert ipython.timeout == 7
    assert isinstance(browser, WebBrowser)
    assert browser.engine.search_url == "http://127.0.0.1:9/search"
    assert isinstance(browser.results, RedisResultStore)
    assert isinstance(finish, FinishAction)


def test_the_interpreter_needs_a_sandbox_provider() -> None:
    with pytest.raises(ValueError, match="sandbox provider"):
        build_actions(["IPythonInterpreter"], ActionResources(settings=ToolWorkerSettings()))


def test_a_user_action_deploys_by_naming_its_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "my_tools.py").write_text(
        "from taskyard.agentkit.actions import BaseAction, register_action\n\n"
        "@register_action\n"
        "class Shout(BaseAction):\n"
        '    """Upper-case text."""\n\n'
        "    def run(self, text: str) -> str:\n"
        "        return text.upper()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(ACTIONS, "_items", dict(ACTIONS._items))  # undone after the test
    load_plugins(ToolWorkerSettings(plugin_modules=" my_tools ,").plugin_modules)
    try:
        assert names(openai_tool_schemas(["Shout"])) == ["Shout"]
        [shout] = build_actions(["Shout"], ActionResources(settings=ToolWorkerSettings()))
        assert shout.run("hi") == "HI"  # type: ignore[attr-defined]
    finally:
        sys.modules.pop("my_tools", None)
