"""`FinishAction`: the model ends the task with its final answer."""

from __future__ import annotations

from taskyard.agentkit.actions.base import BaseAction, text_result
from taskyard.agentkit.actions.registry import register_action
from taskyard.agentkit.schema import ActionReturn, ActionValidCode

__all__ = ["FinishAction"]


@register_action
class FinishAction(BaseAction):
    """Give the final answer and end the task."""

    def run(self, response: str) -> ActionReturn:
        """Give the final answer.

        Args:
            response: the final answer for the user
        """
        return ActionReturn(result=text_result(response), valid=ActionValidCode.FINISH)
