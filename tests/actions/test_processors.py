import pytest

from taskyard.agentkit.actions import (
    ActionExecutor,
    FinishAction,
    InternLMActionProcessor,
    IPythonInterpreter,
)
from taskyard.agentkit.actions.processors import ActionProcessor
from taskyard.agentkit.parsers import InterpreterParser, MixedToolParser, PluginParser
from taskyard.agentkit.schema import ActionReturn, ActionStatusCode, AgentMessage, FunctionCall
from taskyard.sandbox import SandboxProvider


def model_turn(text: str) -> AgentMessage:
    parser = MixedToolParser([InterpreterParser(), PluginParser()])
    return AgentMessage(sender="assistant", content=text, formatted=parser.parse_response(text))


@pytest.fixture
def executor(local_sandboxes: SandboxProvider) -> ActionExecutor:
    return ActionExecutor(
        [FinishAction(), IPythonInterpreter(local_sandboxes)], hooks=[InternLMActionProcessor()]
    )


def test_interpreter_code_runs_on_the_named_code_tool(executor: ActionExecutor) -> None:
    # FinishAction comes first: Lagent would send the code to it.
    turn = model_turn("Let me compute.<|action_start|><|interpreter|>\n2 ** 10<|action_end|>\n")
    reply = executor(turn, "t:s")
    assert reply.sender == "IPythonInterpreter"
    assert isinstance(reply.content, ActionReturn)
    assert reply.content.args == {"command": "2 ** 10"}
    assert reply.formatted == "1024"


def test_plugin_calls_run_as_named(executor: ActionExecutor) -> None:
    turn = model_turn(
        '<|action_start|><|plugin|>\n{"name": "FinishAction", "parameters": {"response": "ok"}}'
        "<|action_end|>\n"
    )
    reply = executor(turn, "t:s")
    assert (reply.sender, reply.formatted) == ("FinishAction", "ok")


def test_a_parse_error_reaches_the_model_as_an_args_error(executor: ActionExecutor) -> None:
    turn = model_turn('<|action_start|><|plugin|>\n{"name": "FinishAction"<|action_end|>\n')
    reply = executor(turn, "t:s")
    assert isinstance(reply.content, ActionReturn)
    assert reply.content.state == ActionStatusCode.ARGS_ERROR
    assert "could not read the plugin call" in reply.formatted


def test_a_turn_without_a_call_is_refused_readably(executor: ActionExecutor) -> None:
    reply = executor(model_turn("The answer is 4."), "t:s")
    assert reply.content.state == ActionStatusCode.ARGS_ERROR  # type: ignore[union-attr]
    assert "holds no tool call" in reply.formatted


def test_failed_results_show_the_error_text(executor: ActionExecutor) -> None:
    turn = model_turn("<|action_start|><|interpreter|>\nundefined_name<|action_end|>\n")
    reply = executor(turn, "t:s")
    assert "NameError" in reply.formatted
    assert reply.content.state == ActionStatusCode.API_ERROR  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "formatted",
    [
        FunctionCall(name="FinishAction", parameters={"response": "x"}),
        {"name": "FinishAction", "parameters": {"response": "x"}},
    ],
)
def test_the_plain_processor_reads_function_calls_and_dicts(formatted: object) -> None:
    run = ActionExecutor([FinishAction()], hooks=[ActionProcessor()])
    reply = run(AgentMessage(content="raw text", formatted=formatted), "s")
    assert reply.formatted == "x"


def test_a_parsed_turn_still_runs_after_a_json_round_trip(executor: ActionExecutor) -> None:
    # Between services the turn travels as JSON: statuses come back as plain integers.
    turn = model_turn("<|action_start|><|interpreter|>\n'ok' * 2<|action_end|>\n")
    again = AgentMessage.model_validate_json(turn.model_dump_json())
    assert executor(again, "t:json").formatted == "'okok'"
