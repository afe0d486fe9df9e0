"""`IPythonInterpreter`: Python code in the session's own long-lived sandboxed interpreter.

A cell's rich outputs (figures, images, HTML tables) come back as the result's `artifacts`,
each described to the model in a line of text (`Artifact.describe`, with a table's text form
under it); in the services the tool worker keeps them as files of the task
(`services/tool_worker/artifacts.py`).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Sequence
from typing import Self

from shared.actions.base import ActionResources, BaseAction, text_result
from shared.actions.registry import register_action
from shared.files.artifacts import artifact_name
from shared.sandbox import ExecutionResult, SandboxProvider
from shared.sandbox.base import DisplayOutput
from shared.schema import ActionReturn, ActionStatusCode, Artifact

__all__ = ["IPythonInterpreter", "artifact_of", "format_execution", "state_lost_note"]

# Models often wrap code in a Markdown fence; the fence itself is not Python.
_FENCED = re.compile(r"^\s*```(?:python|py|ipython)?[ \t]*\n(.*?)\n?```\s*$", re.DOTALL)

STATE_LOST = (
    "Note: the interpreter lost its state and is restarted: variables, imports and files "
    "from earlier cells are gone."
)


@register_action
class IPythonInterpreter(BaseAction):
    """Run Python code in a stateful IPython interpreter: variables, imports and files persist
    between calls of the same session. The value of the last expression is shown."""

    session_bound = True

    def __init__(self, sandboxes: SandboxProvider, timeout: float = 30.0) -> None:
        self.sandboxes = sandboxes
        self.timeout = timeout

    @classmethod
    def build(cls, resources: ActionResources) -> Self:
        if resources.sandboxes is None:
            raise ValueError("IPythonInterpreter needs a sandbox provider")
        return cls(resources.sandboxes, resources.settings.sandbox_timeout_s)

    def run(self, command: str, session_id: str) -> ActionReturn:
        """Run Python code.

        Args:
            command: the Python source to run
        """
        # One interpreter per session: sessions never see each other's state.
        outcome = self.sandboxes.get(session_id).run(strip_fence(command), self.timeout)
        artifacts = [artifact_of(output) for output in outcome.display]
        text = format_execution(outcome, self.timeout, outcome.display)
        if outcome.error or outcome.timed_out:
            return ActionReturn(
                errmsg=text, state=ActionStatusCode.API_ERROR, artifacts=artifacts or None
            )
        return ActionReturn(result=text_result(text), artifacts=artifacts or None)


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
