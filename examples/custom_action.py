"""A custom action, deployable by configuration: a unit-converter toolkit.

Deploy it: set ``TASKYARD_PLUGIN_MODULES=examples.custom_action`` for the agent and tool
workers (run from the repository root), start a tool worker on its queue
(``-Q tools.UnitConverter``), and name it in a task's tools: ``"tools": ["UnitConverter"]``.
The model then sees ``UnitConverter.length`` and ``UnitConverter.temperature``.

Try it here: ``python -m examples.custom_action`` prints the tool schemas and runs two calls.
"""

from __future__ import annotations

import json
from typing import Literal

from taskyard.agentkit.actions import (
    ActionError,
    ActionExecutor,
    BaseAction,
    register_action,
    tool_api,
)
from taskyard.agentkit.schema import ActionReturn, ToolCall

__all__ = ["UnitConverter"]

LengthUnit = Literal["mm", "cm", "m", "km", "in", "ft", "yd", "mi"]
TemperatureUnit = Literal["C", "F", "K"]

_METRES = {
    "mm": 0.001, "cm": 0.01, "m": 1.0, "km": 1000.0,
    "in": 0.0254, "ft": 0.3048, "yd": 0.9144, "mi": 1609.344,
}  # fmt: skip


@register_action
class UnitConverter(BaseAction):
    """Convert quantities between units of length and of temperature."""

    @tool_api
    def length(self, value: float, from_unit: LengthUnit, to_unit: LengthUnit) -> str:
        """Convert a length.

        Args:
            value: the length in `from_unit`
            from_unit: the unit of `value`
            to_unit: the unit to convert to
        """
        converted = value * _METRES[from_unit] / _METRES[to_unit]
        return f"{value:g} {from_unit} = {converted:.6g} {to_unit}"

    @tool_api
    def temperature(
        self, value: float, from_unit: TemperatureUnit, to_unit: TemperatureUnit
    ) -> str:
        """Convert a temperature.

        Args:
            value: the temperature in `from_unit`
            from_unit: C (Celsius), F (Fahrenheit) or K (kelvin)
            to_unit: the unit to convert to
        """
        kelvin = _to_kelvin(value, from_unit)
        if kelvin < 0:
            raise ActionError(f"{value:g} {from_unit} is below absolute zero")
        return f"{value:g} {from_unit} = {_from_kelvin(kelvin, to_unit):.6g} {to_unit}"


def _to_kelvin(value: float, unit: TemperatureUnit) -> float:
    return {"C": value + 273.15, "F": (value - 32) * 5 / 9 + 273.15, "K": value}[unit]


def _from_kelvin(kelvin: float, unit: TemperatureUnit) -> float:
    return {"C": kelvin - 273.15, "F": (kelvin - 273.15) * 9 / 5 + 32, "K": kelvin}[unit]


def main() -> None:
    """Show the schemas the model gets, then run calls as the tool worker would."""
    executor = ActionExecutor([UnitConverter()])
    print(json.dumps(executor.tool_schemas(), indent=2))
    calls = [
        ToolCall(id="c1", name="UnitConverter.length", parameters={
            "value": 5, "from_unit": "km", "to_unit": "mi"}),
        ToolCall(id="c2", name="UnitConverter.temperature", parameters={
            "value": -500, "from_unit": "C", "to_unit": "K"}),
    ]  # fmt: skip
    for call in calls:
        ret = executor(call, session_id="demo:example").content
        assert isinstance(ret, ActionReturn)
        print(f"{call.name} -> {ret.state.name}: {ret.format_result() or ret.errmsg}")


if __name__ == "__main__":
    main()
