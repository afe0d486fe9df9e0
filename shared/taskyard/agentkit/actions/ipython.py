"""`IPythonInterpreter`: Python code in the session's own long-lived sandboxed interpreter.

A cell's rich outputs (figures, images, HTML tables) come back as the result's `artifacts`,
each described to the model in a line of text (`Artifact.describe`, with a table's text form
under it); in the services the tool worker keeps them as files of the task
(`services/tool_worker/artifacts.py`).

Given a `CellLog` (the tool worker's), it keeps the cells that ran without error; once the
session's interpreter has lost its state, the model is offered ``%replay``: those cells run
again, in order, in the fresh interpreter (`shared/taskyard/agentkit/actions/cells.py`).
"""

from __future__ import annotations

import base64
import re
import time
from collections.abc import Sequence
from typing import Self

from taskyard.agentkit.actions.base import ActionResources, BaseAction, text_result
from taskyard.agentkit.actions.cells import CellLog
from taskyard.agentkit.actions.registry import register_action
from taskyard.agentkit.schema import ActionReturn, ActionStatusCode, Artifact
from taskyard.files.artifacts import artifact_name
from taskyard.sandbox import ExecutionResult, SandboxProvider
from taskyard.sandbox.base import DisplayOutput

__all__ = ["IPythonInterpreter", "artifact_of", "format_execution", "state_lost_note"]

# Models often wrap code in a Markdown fence; the fence itself is not Python.
_FENCED = re.compile(r"^\s*```(?:python|py|ipython)?[ \t]*\n(.*?)\n?```\s*$", re.DOTALL)

REPLAY = "%replay"
STATE_LOST = (
    "Note: the interpreter lost its state and is restarted: variables, imports and files "
    "from earlier cells are gone."
)


@register_action
class IPythonInterpreter(BaseAction):
    """Run Python code in a stateful IPython interpreter: variables, imports and files persist
    between calls of the same session. The value of the last expression is shown."""

    session_bound = True

    def __init__(
        self, sandboxes: SandboxProvider, timeout: float = 30.0, cells: CellLog | None = None
    ) -> None:
        self.sandboxes = sandboxes
        self.timeout = timeout
        self.cells = cells

    @classmethod
    def build(cls, resources: ActionResources) -> Self:
        if resources.sandboxes is None:
            raise ValueError("IPythonInterpreter needs a sandbox provider")
        return cls(resources.sandboxes, resources.settings.sandbox_timeout_s, resources.cells)

    def run(self, command: str, session_id: str) -> ActionReturn:
        """Run Python code.

        Args:
            command: the Python source to run
        """
        code = strip_fence(command)
        if code.strip() == REPLAY and self.cells is not None:
            return self._replay(session_id)
        # One interpreter per session: sessions never see each other's state.
        outcome = self.sandboxes.get(session_id).run(code, self.timeout)
        kept = self._record(session_id, code, outcome)
        artifacts = [artifact_of(output) for output in outcome.display]
        text = format_execution(outcome, self.timeout, outcome.display)
        if kept:  # right under the note on the lost state, the cell's own output after it
            note, _, rest = text.partition("\n")
            text = "\n".join(part for part in (note, _replay_offer(kept), rest) if part)
        if outcome.error or outcome.timed_out:
            return ActionReturn(
                errmsg=text, state=ActionStatusCode.API_ERROR, artifacts=artifacts or None
            )
        return ActionReturn(result=text_result(text), artifacts=artifacts or None)

    def _record(self, session_key: str, code: str, outcome: ExecutionResult) -> int:
        """Keep the cell if it ran cleanly; if the interpreter was replaced first, set the
        earlier ones aside for a replay: how many were."""
        if self.cells is None:
            return 0
        kept = self.cells.restarted(session_key) if outcome.state_lost else 0
        if not (outcome.error or outcome.timed_out or outcome.cancelled):
            self.cells.ran(session_key, code)
        return kept

    def _replay(self, session_key: str) -> ActionReturn:
        """Run the cells set aside at the last loss again, in order, within one call's time;
        stop at the first that fails."""
        assert self.cells is not None
        cells = self.cells.take_replay(session_key)
        if not cells:
            return ActionReturn(
                errmsg="Nothing to replay: no cells were recorded before this session's "
                "interpreter last lost its state.",
                state=ActionStatusCode.API_ERROR,
            )
        sandbox, deadline = self.sandboxes.get(session_key), time.monotonic() + self.timeout
        for done, code in enumerate(cells):
            outcome = sandbox.run(code, max(0.1, deadline - time.monotonic()))
            if outcome.error or outcome.timed_out or outcome.state_lost:
                text = format_execution(outcome, self.timeout)
                return ActionReturn(
                    errmsg=f"Replay stopped: recorded cell {done + 1} of {len(cells)} failed "
                    f"when run again ({done} ran again before it; the rest did not run):\n{text}",
                    state=ActionStatusCode.API_ERROR,
                )
            self.cells.ran(session_key, code)
        said = (
            f"Replayed the {len(cells)} cells recorded before the interpreter lost its state: "
            "each ran again, in order, without an error. Their variables, imports and files "
            "are rebuilt as running them again rebuilds them (time, randomness and outside "
            "data may differ); nothing was restored from a snapshot."
        )
        return ActionReturn(result=text_result(said))


def _replay_offer(kept: int) -> str:
    cells = "1 earlier cell that ran without an error is" if kept == 1 else (
        f"{kept} earlier cells that ran without an error are"
    )  # fmt: skip
    return (
        f"The session's {cells} recorded: call this tool with `{REPLAY}` as the whole command "
        "to run them again, in order, in this interpreter (a re-run, not a restore: time, "
        "randomness and outside data may differ)."
    )


def strip_fence(command: str) -> str:
    """The code inside a Markdown code fence, or the command as it is."""
    fenced = _FENCED.match(command)
    return fenced.group(1) if fenced else command


def artifact_of(output: DisplayOutput) -> Artifact:
    """A rich output as an artifact carrying its bytes, named by its kind and content."""
    return Artifact(
        name=artifact_name(output.kind, output.mime, output.data),
        mime=output.mime, kind=output.kind, size=len(output.data), width=output.width,
        height=output.height,
        data=base64.b64encode(output.data).decode(),
    )  # fmt: skip


def format_execution(
    outcome: ExecutionResult, timeout: float, outputs: Sequence[DisplayOutput] = ()
) -> str:
    """One cell's outcome as the text the model reads: its rich outputs each as a line naming
    the artifact (and, but for images, their text form), before the last value."""
    parts = [state_lost_note(outcome.state_lost_reason)] if outcome.state_lost else []
    parts += [text.rstrip("\n") for text in (outcome.stdout, outcome.stderr) if text]
    for output in outputs:
        parts.append(artifact_of(output).describe())
        if not output.mime.startswith("image/") and output.text != outcome.result:
            parts.append(output.text)  # a table's text; the last value's is shown below
    if outcome.result is not None:
        parts.append(outcome.result)
    if outcome.error:
        parts.append(outcome.error.rstrip("\n"))
    elif outcome.timed_out:  # a backend may report a timeout without words for it
        parts.append(f"TimeoutError: the code ran longer than {timeout:g} s and was interrupted.")
    return "\n".join(parts) if parts else "(no output)"


def state_lost_note(reason: str | None) -> str:
    """What the model reads first when the session's interpreter lost its state (and why)."""
    if reason is None:
        return STATE_LOST
    return (
        f"Note: state lost ({reason}): the interpreter was restarted; variables, imports and "
        "files from earlier cells are gone."
    )
