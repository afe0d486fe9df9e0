"""IPythonInterpreter on the real sandbox providers (local namespaces and Docker)."""

from collections.abc import Iterator
from uuid import uuid4

import pytest

from shared.actions import ActionExecutor, IPythonInterpreter
from shared.actions.ipython import STATE_LOST, format_execution, strip_fence
from shared.sandbox import ExecutionResult, SandboxProvider, make_sandbox_provider
from shared.schema import ActionReturn, ActionStatusCode, AgentMessage
from shared.settings import Settings


@pytest.fixture(scope="module", params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def provider(request: pytest.FixtureRequest) -> Iterator[SandboxProvider]:
    if request.param == "docker":
        request.getfixturevalue("sandbox_image")  # starts the engine, builds the image
    settings = Settings(sandbox_backend=request.param, sandbox_warm_pool=0, sandbox_memory="128m")
    provider = make_sandbox_provider(settings)
    yield provider
    provider.close_all()


@pytest.fixture
def executor(provider: SandboxProvider) -> ActionExecutor:
    return ActionExecutor([IPythonInterpreter(provider, timeout=5)])


def session() -> str:
    return f"test:{uuid4().hex}"


def run(executor: ActionExecutor, code: str, session_key: str) -> ActionReturn:
    message = AgentMessage(content={"name": "IPythonInterpreter", "parameters": {"command": code}})
    ret = executor(message, session_key).content
    assert isinstance(ret, ActionReturn)
    return ret


def test_output_and_last_value_come_back(executor: ActionExecutor) -> None:
    ret = run(
        executor, "import sys\nprint('hello')\nprint('warn', file=sys.stderr)\n6 * 7", session()
    )
    assert ret.state == ActionStatusCode.SUCCESS
    assert ret.format_result() == "hello\nwarn\n42"
    assert ret.args == {
        "command": "import sys\nprint('hello')\nprint('warn', file=sys.stderr)\n6 * 7"
    }


def test_state_persists_within_a_session_and_never_crosses_sessions(
    executor: ActionExecutor,
) -> None:
    # Lagent shares one interpreter between sessions; here each session has its own.
    alice, bob = session(), session()
    run(executor, "secret = 'alice-only'", alice)
    assert run(executor, "secret", alice).format_result() == "'alice-only'"
    leaked = run(executor, "secret", bob)
    assert leaked.state == ActionStatusCode.API_ERROR
    assert "NameError: name 'secret' is not defined" in leaked.errmsg


def test_exceptions_are_api_errors_with_the_output_so_far(executor: ActionExecutor) -> None:
    ret = run(executor, "print('step 1')\n1 / 0", session())
    assert ret.state == ActionStatusCode.API_ERROR
    assert ret.errmsg.startswith("step 1\nTraceback")
    assert ret.errmsg.endswith("ZeroDivisionError: division by zero")


def test_a_markdown_fence_around_the_code_is_removed(executor: ActionExecutor) -> None:
    assert run(executor, "```python\nx = 2\nx + 1\n```", session()).format_result() == "3"
    assert strip_fence("print('```')") == "print('```')"


def test_a_timeout_interrupts_the_cell_and_keeps_the_session(provider: SandboxProvider) -> None:
    executor = ActionExecutor([IPythonInterpreter(provider, timeout=1)])
    key = session()
    run(executor, "kept = 'yes'", key)
    ret = run(executor, "import time\nprint('started', flush=True)\ntime.sleep(60)", key)
    assert ret.state == ActionStatusCode.API_ERROR
    assert "Timed out after 1s" in ret.errmsg
    assert run(executor, "kept", key).format_result() == "'yes'"


def test_a_dead_interpreter_is_reported_as_lost_state(executor: ActionExecutor) -> None:
    key = session()
    run(executor, "x = 1", key)
    died = run(executor, "import os\nos._exit(1)", key)
    assert died.state == ActionStatusCode.API_ERROR
    assert died.errmsg.startswith(STATE_LOST)
    after = run(executor, "x", key)
    assert "NameError" in after.errmsg


def test_outcome_text_for_the_model() -> None:
    timed_out = format_execution(ExecutionResult(stdout="partial\n", timed_out=True), 2.5)
    assert timed_out == "partial\nTimeoutError: the code ran longer than 2.5 s and was interrupted."
    restarted = format_execution(ExecutionResult(result="1", state_lost=True), 1)
    assert restarted == f"{STATE_LOST}\n1"
    expired = ExecutionResult(result="1", state_lost=True, state_lost_reason="session expired")
    assert format_execution(expired, 1).startswith("Note: state lost (session expired): ")
    assert format_execution(ExecutionResult(), 1) == "(no output)"


def test_a_reaped_session_tells_the_model_its_state_expired() -> None:
    settings = Settings(sandbox_backend="local", sandbox_warm_pool=0, sandbox_idle_s=0)
    provider = make_sandbox_provider(settings)
    try:
        executor = ActionExecutor([IPythonInterpreter(provider, timeout=5)])
        key = session()
        run(executor, "x = 1", key)
        assert provider.reap_idle() == [key]
        ret = run(executor, "x", key)
        assert ret.errmsg.startswith("Note: state lost (session expired")
        assert "NameError" in ret.errmsg
    finally:
        provider.close_all()
