"""The custom-action example works as a plugin module named in settings."""

from pathlib import Path

import pytest

from taskyard.agentkit.actions import ACTIONS, ActionExecutor, ActionResources, openai_tool_schemas
from taskyard.agentkit.registry import load_plugins
from taskyard.agentkit.schema import ActionReturn, ActionStatusCode, ToolCall
from taskyard.plumbing.settings import ToolWorkerSettings

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def executor(monkeypatch: pytest.MonkeyPatch) -> ActionExecutor:
    # Workers run from the repository root, which puts `examples` on their import path.
    monkeypatch.syspath_prepend(str(ROOT))
    load_plugins(ToolWorkerSettings(plugin_modules="examples.custom_action").plugin_modules)
    resources = ActionResources(settings=ToolWorkerSettings())
    return ActionExecutor.from_registry(resources, ["UnitConverter"])


def run(executor: ActionExecutor, name: str, **parameters: object) -> ActionReturn:
    reply = executor(ToolCall(id="c1", name=name, parameters=parameters), "t:s")
    assert reply.sender == "UnitConverter" and reply.extra_info == {"tool_call_id": "c1"}
    assert isinstance(reply.content, ActionReturn)
    return reply.content


def test_the_plugin_registers_a_toolkit_with_enum_units(executor: ActionExecutor) -> None:
    assert "UnitConverter" in ACTIONS
    schemas = {s["function"]["name"]: s["function"] for s in openai_tool_schemas(["UnitConverter"])}
    assert sorted(schemas) == ["UnitConverter.length", "UnitConverter.temperature"]
    units = schemas["UnitConverter.temperature"]["parameters"]["properties"]["to_unit"]
    assert units["enum"] == ["C", "F", "K"]


def test_conversions_and_their_errors(executor: ActionExecutor) -> None:
    miles = run(executor, "UnitConverter.length", value=5, from_unit="km", to_unit="mi")
    assert miles.format_result() == "5 km = 3.10686 mi"
    boiling = run(executor, "UnitConverter.temperature", value=100, from_unit="C", to_unit="F")
    assert boiling.format_result() == "100 C = 212 F"
    cold = run(executor, "UnitConverter.temperature", value=-1, from_unit="K", to_unit="C")
    assert (cold.state, cold.errmsg) == (ActionStatusCode.API_ERROR, "-1 K is below absolute zero")
    bad = run(executor, "UnitConverter.length", value=1, from_unit="league", to_unit="m")
    assert bad.state == ActionStatusCode.ARGS_ERROR
    assert "from_unit: input should be 'mm', 'cm'" in bad.errmsg
