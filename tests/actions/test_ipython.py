import pytest
from action_fakes import InProcessProvider

from shared.actions import ActionExecutor, IPythonInterpreter
from shared.actions.ipython import STATE_LOST, format_execution, strip_fence
from shared.sandbox import ExecutionResult
from shared.schema import ActionReturn, ActionStatusCode, AgentMessage


def run(executor: ActionExecutor, code: str, session: str) -> ActionReturn:
    message = AgentMessage(content={"name": "IPythonInterpreter", "parameters": {"command": code}})
    ret = executor(message, session).content
    assert isinstance(ret, ActionReturn)
    return ret


@pytest.fixture
def executor(sandboxes: InProcessProvider) -> ActionExecutor:
    return ActionExecutor([IPythonInterpreter(sandboxes, timeout=5)])


def test_output_and_last_value_come_back(executor: ActionExecutor) -> None:
    ret = run(executor, "print('hello')\n6 * 7", "t:a")
    assert ret.state == ActionStatusCode.SUCCESS
    assert ret.format_result() == "hello\n42"
    assert ret.args == {"command": "print('hello')\n6 * 7"}


def test_state_persists_within_a_session_and_never_crosses_sessions(
    executor: ActionExecutor, sandboxes: InProcessProvider
) -> None:
    # Lagent shares one interpreter between sessions; here each session has its own.
    run(executor, "secret = 'alice-only'", "t:alice")
    assert run(executor, "secret", "t:alice").format_result() == "'alice-only'"
    leaked = run(executor, "secret", "t:bob")
    assert leaked.state == ActionStatusCode.API_ERROR
    assert "NameError" in leaked.errmsg
    assert set(sandboxes.sandboxes) == {"t:alice", "t:bob"}


def test_exceptions_are_api_errors_with_the_output_so_far(executor: ActionExecutor) -> None:
    ret = run(executor, "print('step 1')\n1 / 0", "t:a")
    assert ret.state == ActionStatusCode.API_ERROR
    assert ret.errmsg == "step 1\nZeroDivisionError: division by zero"


def test_a_markdown_fence_around_the_code_is_removed(
    executor: ActionExecutor, sandboxes: InProcessProvider
) -> None:
    assert run(executor, "```python\nx = 2\nx + 1\n```", "t:a").format_result() == "3"
    assert sandboxes.get("t:a").calls == [("x = 2\nx + 1", 5)]
    assert strip_fence("print('```')") == "print('```')"


def test_timeouts_and_lost_state_are_told_to_the_model() -> None:
    timed_out = format_execution(ExecutionResult(stdout="partial\n", timed_out=True), 2.5)
    assert timed_out == (
        "partial\nTimeoutError: the code ran longer than 2.5 s and was interrupted."
    )
    died = ExecutionResult(error="interpreter died", state_lost=True)
    assert format_execution(died, 1) == f"{STATE_LOST}\ninterpreter died"
    restarted = ExecutionResult(result="1", state_lost=True)
    assert format_execution(restarted, 1).startswith(STATE_LOST)
    assert format_execution(ExecutionResult(), 1) == "(no output)"


def test_a_timed_out_cell_is_an_api_error(sandboxes: InProcessProvider) -> None:
    class Slow:
        def run(self, code: str, timeout: float) -> ExecutionResult:
            return ExecutionResult(timed_out=True, error=f"Timed out after {timeout:g}s")

        def close(self) -> None: ...

    sandboxes.sandboxes["t:slow"] = Slow()  # type: ignore[assignment]
    ret = run(ActionExecutor([IPythonInterpreter(sandboxes, timeout=3)]), "while 1: pass", "t:slow")
    assert ret.state == ActionStatusCode.API_ERROR
    assert ret.errmsg == "Timed out after 3s"
