"""IPythonInterpreter on the real sandbox providers (local namespaces and Docker)."""

import base64
import struct
from collections.abc import Iterator
from uuid import uuid4

import pytest

from taskyard.agentkit.actions import ActionExecutor, IPythonInterpreter
from taskyard.agentkit.actions.ipython import STATE_LOST, format_execution, strip_fence
from taskyard.agentkit.schema import ActionReturn, ActionStatusCode, AgentMessage
from taskyard.plumbing.settings import ToolWorkerSettings
from taskyard.sandbox import ExecutionResult, SandboxProvider, make_sandbox_provider


@pytest.fixture(scope="module", params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def provider(request: pytest.FixtureRequest) -> Iterator[SandboxProvider]:
    if request.param == "docker":
        request.getfixturevalue("sandbox_image")  # starts the engine, builds the image
    settings = ToolWorkerSettings(
        sandbox_backend=request.param, sandbox_warm_pool=0, sandbox_memory="128m"
    )
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
    settings = ToolWorkerSettings(sandbox_backend="local", sandbox_warm_pool=0, sandbox_idle_s=0)
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


# The start of a 3x2 PNG: enough for its size, which is all the worker reads of it.
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + struct.pack(">II", 3, 2) + b"\x08\x00\x00\x00\x00"
TINY_PNG = f"class Plot:\n    def _repr_png_(self): return {PNG!r}\n"


def test_rich_outputs_come_back_as_artifacts_the_model_reads_about(
    executor: ActionExecutor,
) -> None:
    ret = run(executor, TINY_PNG + "print('drawn')\ndisplay(Plot())", session())
    assert ret.state == ActionStatusCode.SUCCESS
    (artifact,) = ret.artifacts or []
    assert artifact.name.startswith("image-") and artifact.name.endswith(".png")
    assert (artifact.mime, artifact.width, artifact.height) == ("image/png", 3, 2)
    assert base64.b64decode(artifact.data or "").startswith(b"\x89PNG")
    assert ret.format_result() == f"drawn\n[image: {artifact.name}, 3\u00d72]"


def test_a_failing_cell_keeps_what_it_showed(executor: ActionExecutor) -> None:
    ret = run(executor, TINY_PNG + "display(Plot())\n1 / 0", session())
    assert ret.state == ActionStatusCode.API_ERROR
    (artifact,) = ret.artifacts or []
    assert f"[image: {artifact.name}, 3\u00d72]" in ret.errmsg
    assert ret.errmsg.endswith("ZeroDivisionError: division by zero")


@pytest.mark.docker
def test_a_chart_and_a_table_for_the_model(sandbox_image: str) -> None:
    settings = ToolWorkerSettings(sandbox_image=sandbox_image, sandbox_warm_pool=0)
    provider = make_sandbox_provider(settings)
    try:
        executor = ActionExecutor([IPythonInterpreter(provider, timeout=30)])
        code = ("import pandas as pd\nimport matplotlib.pyplot as plt\n"
                "df = pd.DataFrame({'x': [1, 2, 3], 'y': [1, 4, 9]})\n"
                "df.plot(x='x', y='y')\nplt.show()\ndf")  # fmt: skip
        ret = run(executor, code, session())
        figure, table = ret.artifacts or []
        assert (figure.kind, figure.width, figure.height) == ("figure", 640, 480)
        assert table.kind == "table" and table.name.endswith(".html")
        text = ret.format_result()
        assert text.startswith(f"[image: {figure.name}, 640\u00d7480]\n[table: {table.name}, ")
        assert text.count("x  y") == 1  # the table's text once, as the cell's value
    finally:
        provider.close_all()


class _Cells:
    """A `CellLog` in memory, as the tool worker keeps one in Redis."""

    def __init__(self) -> None:
        self.current: dict[str, list[str]] = {}
        self.set_aside: dict[str, list[str]] = {}

    def ran(self, session_key: str, code: str) -> None:
        self.current.setdefault(session_key, []).append(code)

    def restarted(self, session_key: str) -> int:
        self.set_aside[session_key] = self.current.pop(session_key, [])
        return len(self.set_aside[session_key])

    def take_replay(self, session_key: str) -> list[str]:
        return self.set_aside.pop(session_key, [])


def test_after_a_lost_state_the_model_may_replay_the_cells_that_ran(
    provider: SandboxProvider,
) -> None:
    cells = _Cells()
    executor = ActionExecutor([IPythonInterpreter(provider, timeout=5, cells=cells)])
    key = session()
    run(executor, "x = 40", key)
    run(executor, "oops", key)  # a NameError: not kept
    run(executor, "```python\nx += 1\nopen('f.txt', 'w').write('kept')\n```", key)
    provider.forget(key, "its tool worker tools@h stopped answering")
    provider.release(key)
    lost = run(executor, "print(globals().get('x'))", key)
    said = lost.format_result()
    note, offer, output = said.split("\n")  # the offer under the note, the cell's output last
    assert note.startswith("Note: state lost (its tool worker tools@h stopped answering)")
    assert "2 earlier cells that ran without an error are recorded" in offer and "%replay" in offer
    assert output == "None"
    replayed = run(executor, "%replay", key)
    assert replayed.state == ActionStatusCode.SUCCESS
    assert replayed.format_result().startswith("Replayed the 2 cells recorded before")
    after = run(executor, "print(x + 1, open('f.txt').read())", key)
    assert after.format_result() == "42 kept"
    again = run(executor, "%replay", key)  # one replay per loss
    assert again.state == ActionStatusCode.API_ERROR and "Nothing to replay" in (again.errmsg or "")


def test_a_replay_stops_at_the_first_cell_that_fails_again(provider: SandboxProvider) -> None:
    cells = _Cells()
    executor = ActionExecutor([IPythonInterpreter(provider, timeout=5, cells=cells)])
    key = session()
    run(executor, "import os\nos.makedirs('d')", key)  # fails when run again: d exists
    run(executor, "y = 1", key)
    cells.restarted(key)  # as if the interpreter had been replaced (its files kept here)
    ret = run(executor, "%replay", key)
    assert ret.state == ActionStatusCode.API_ERROR
    assert (ret.errmsg or "").startswith("Replay stopped: recorded cell 1 of 2 failed")
    assert "FileExistsError" in (ret.errmsg or "")


def test_without_a_cell_log_replay_is_just_code(executor: ActionExecutor) -> None:
    ret = run(executor, "%replay", session())
    assert ret.state == ActionStatusCode.API_ERROR  # IPython magics are not Python here
