from typing import Annotated

import pytest

from taskyard.agentkit.actions import ActionError, BaseAction, tool_api
from taskyard.agentkit.schema import ActionStatusCode


class Calculator(BaseAction):
    """Arithmetic on numbers."""

    @tool_api
    def add(self, a: int, b: Annotated[int, "the addend"] = 1) -> int:
        """Add two numbers.

        Args:
            a: the augend
            b: not this description: Annotated wins
        """
        return a + b

    @tool_api
    async def divide(self, a: float, b: float) -> float:
        """Divide a by b."""
        if b == 0:
            raise ActionError("cannot divide by zero")
        return a / b


class Echo(BaseAction):
    """Repeat text back."""

    name = "Repeat"

    def run(self, text: str, times: int = 1, session_id: str = "") -> str:
        """Echo.

        Args:
            text: what to repeat
            times: how often
        """
        return " ".join([text] * times) + f" ({session_id})"


def test_toolkit_apis_are_named_tool_dot_api_with_schemas_from_hints() -> None:
    assert Calculator.is_toolkit() and sorted(Calculator.apis) == ["add", "divide"]
    add = next(s for s in Calculator.tool_schemas() if s["function"]["name"] == "Calculator.add")
    assert add == {
        "type": "function",
        "function": {
            "name": "Calculator.add",
            "description": "Add two numbers.",
            "parameters": {
                "type": "object",
                "properties": {
                    "a": {"type": "integer", "description": "the augend"},
                    "b": {"type": "integer", "description": "the addend", "default": 1},
                },
                "required": ["a"],
                "additionalProperties": False,
            },
        },
    }


def test_single_api_action_uses_its_name_and_class_description_and_hides_session() -> None:
    [schema] = Echo.tool_schemas()
    assert not Echo.is_toolkit()
    assert schema["function"]["name"] == "Repeat"
    assert schema["function"]["description"] == "Repeat text back."
    assert set(schema["function"]["parameters"]["properties"]) == {"text", "times"}


async def test_arguments_are_validated_and_coerced() -> None:
    ret = await Calculator().acall("add", {"a": "2", "b": 3}, "s")
    assert ret.state == ActionStatusCode.SUCCESS
    assert ret.result == [{"type": "text", "content": "5"}]
    assert ret.type == "Calculator.add" and ret.args == {"a": "2", "b": 3}


async def test_bad_missing_and_unknown_arguments_are_args_errors() -> None:
    ret = await Calculator().acall("add", {"b": "two", "c": 1}, "s")
    assert ret.state == ActionStatusCode.ARGS_ERROR
    assert "missing required argument 'a'" in ret.errmsg
    assert "unknown argument 'c'" in ret.errmsg
    assert "b: input should be a valid integer" in ret.errmsg


async def test_the_session_is_injected_and_cannot_be_set_by_the_model() -> None:
    ret = await Echo().acall("run", {"text": "hi", "times": 2}, "tenant:s1")
    assert ret.format_result() == "hi hi (tenant:s1)"
    spoofed = await Echo().acall("run", {"text": "hi", "session_id": "other"}, "tenant:s1")
    assert spoofed.state == ActionStatusCode.ARGS_ERROR
    assert "unknown argument 'session_id'" in spoofed.errmsg


async def test_action_errors_and_crashes_become_api_errors() -> None:
    ret = await Calculator().acall("divide", {"a": 1, "b": 0}, "s")
    assert (ret.state, ret.errmsg) == (ActionStatusCode.API_ERROR, "cannot divide by zero")

    class Broken(BaseAction):
        def run(self) -> None:
            raise KeyError("gone")

    broken = await Broken().acall("run", {}, "s")
    assert broken.state == ActionStatusCode.API_ERROR
    assert broken.errmsg == "Broken failed: KeyError: 'gone'"


async def test_unknown_api() -> None:
    ret = await Calculator().acall("mul", {}, "s")
    assert ret.state == ActionStatusCode.API_ERROR
    assert ret.errmsg == "Calculator has no API 'mul' (it has: Calculator.add, Calculator.divide)"


def test_run_and_tool_apis_cannot_be_mixed_and_var_args_are_refused() -> None:
    with pytest.raises(TypeError, match="cannot be mixed"):

        class Mixed(BaseAction):
            def run(self) -> None: ...

            @tool_api
            def other(self) -> None: ...

    with pytest.raises(TypeError, match="\\*args"):

        class VarArgs(BaseAction):
            def run(self, *args: int) -> None: ...


async def test_outputs_of_any_type_become_text_results() -> None:
    class Shapes(BaseAction):
        @tool_api
        def data(self) -> dict:
            return {"π": 3.14}

        @tool_api
        def nothing(self) -> None:
            return None

    assert (await Shapes().acall("data", {}, "s")).format_result() == '{"π": 3.14}'
    assert (await Shapes().acall("nothing", {}, "s")).result == []
