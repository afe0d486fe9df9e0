"""`IPythonInterpreter`: Python code in the session's own long-lived sandboxed interpreter."""

from __future__ import annotations

import re
from typing import Self

from shared.actions.base import ActionResources, BaseAction, text_result
from shared.actions.registry import register_action
from shared.sandbox import ExecutionResult, SandboxProvider
from shared.schema import ActionReturn, ActionStatusCode

__all__ = ["IPythonInterpreter", "format_execution"]

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
        text = format_execution(outcome, self.timeout)
        if outcome.error or outcome.timed_out:
            return ActionReturn(errmsg=text, state=ActionStatusCode.API_ERROR)
        return ActionReturn(result=text_result(text))


def strip_fence(command: str) -> str:
    """The code inside a Markdown code fence, or the command as it is."""
    fenced = _FENCED.match(command)
    return fenced.group(1) if fenced else command


def format_execution(outcome: ExecutionResult, timeout: float) -> str:
    """One cell's outcome as the text the model reads."""
    parts = [_state_lost(outcome.state_lost_reason)] if outcome.state_lost else []
    parts += [text.rstrip("\n") for text in (outcome.stdout, outcome.stderr) if text]
    if outcome.result is not None:
        parts.append(outcome.result)
    if outcome.error:
        parts.append(outcome.error.rstrip("\n"))
    elif outcome.timed_out:  # a backend may report a timeout without words for it
        parts.append(f"TimeoutError: the code ran longer than {timeout:g} s and was interrupted.")
    return "\n".join(parts) if parts else "(no output)"


def _state_lost(reason: str | None) -> str:
    if reason is None:
        return STATE_LOST
    return (
        f"Note: state lost ({reason}): the interpreter was restarted; variables, imports and "
        "files from earlier cells are gone."
    )
