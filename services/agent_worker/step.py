"""One agent step: load the task and the session memory, run the agent once, commit, then
either finish the task or send its tool calls out as jobs."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from services.agent_worker.runner import StepLoop, run_agent_step
from shared.events import EventKind
from shared.schema import AgentMessage, ToolCall
from shared.settings import Settings
from shared.store import StepConflict, TaskStore
from shared.task import TaskRecord, TaskStatus

__all__ = ["StepRunner"]

log = logging.getLogger("taskyard.agent_worker")

# Sends one tool call out as a job: (task, step, call) -> None.
DispatchTool = Callable[[TaskRecord, int, ToolCall], None]
# Starts a task's step: (task_id, step) -> None.
EnqueueStep = Callable[[str, int], None]


class StepRunner:
    """The agent step, with its dependencies handed in (so tests can run it directly)."""

    def __init__(
        self, store: TaskStore, settings: Settings, dispatch: DispatchTool, enqueue: EnqueueStep
    ) -> None:
        self.store = store
        self.settings = settings
        self.dispatch = dispatch
        self.enqueue = enqueue
        self.loop = StepLoop()

    def run(self, task_id: str, step: int, redelivered: bool = False) -> None:
        record = self.store.get(task_id)
        if record is None or record.terminal:
            return
        if record.step != step:
            self._resume_dispatch(record, step, redelivered)
            return
        if self._over_limits(record):
            return
        if record.status != TaskStatus.RUNNING and not self.store.set_status(
            task_id, TaskStatus.RUNNING, step=str(step)
        ):
            return  # cancelled meanwhile
        inputs = self._inputs(record)
        output = self.loop.run(self._call_agent(record, inputs))
        self._commit(record, inputs, output)

    async def _call_agent(self, record: TaskRecord, inputs: list[AgentMessage]) -> AgentMessage:
        history = self.store.memory(record.tenant, record.session_id)

        async def on_token(delta: str) -> None:
            self.store.publish(
                record.id, EventKind.TOKEN, {"delta": delta, "sender": record.spec.name}
            )

        return await run_agent_step(
            record.spec,
            history,
            inputs,
            session_id=record.session_id,
            task_id=record.id,
            settings=self.settings,
            client=self.loop.client(self.settings),
            on_token=on_token,
        )

    def _inputs(self, record: TaskRecord) -> list[AgentMessage]:
        if record.step == 0:
            return [AgentMessage(sender="user", content=record.input)]
        return self.store.tool_results(record.id, record.step - 1, record.pending_calls)

    def _commit(self, record: TaskRecord, inputs: list[AgentMessage], output: AgentMessage) -> None:
        calls = _tool_calls(output)
        # The user's message is news to the event stream; tool results were published as they came.
        published = [*inputs, output] if record.step == 0 else [output]
        usage = _usage(output)
        try:
            if calls:
                ids = [c.id for c in calls]
                self.store.commit_step(
                    record,
                    [*inputs, output],
                    TaskStatus.WAITING_TOOLS,
                    published,
                    usage,
                    pending_calls=ids,
                )
            else:
                self.store.commit_step(
                    record,
                    [*inputs, output],
                    TaskStatus.SUCCEEDED,
                    published,
                    usage,
                    result=_text(output),
                )
        except StepConflict:
            log.info("step already committed", extra={"task_id": record.id, "step": record.step})
            return
        if calls:
            for call in calls:
                self.dispatch(record, record.step, call)
        else:
            self._finish(record)

    def _resume_dispatch(self, record: TaskRecord, step: int, redelivered: bool) -> None:
        # A redelivered step that was committed but crashed before sending its tool calls.
        committed_with_tools = record.step == step + 1 and record.status == TaskStatus.WAITING_TOOLS
        if not (redelivered and committed_with_tools):
            return
        turns = [m for m in self.store.messages(record.id) if _tool_calls(m)]
        for call in _tool_calls(turns[-1]) if turns else []:
            if not self.store.has_tool_result(record.id, step, call.id):
                self.dispatch(record, step, call)

    def _over_limits(self, record: TaskRecord) -> bool:
        max_steps = record.spec.max_steps or self.settings.default_max_steps
        if record.step >= max_steps:
            reason = f"max_steps ({max_steps}) reached without a final answer"
            self.end(record, TaskStatus.FAILED, reason)
            return True
        if time.time() - record.created_at > self.settings.task_deadline_s:
            reason = f"deadline of {self.settings.task_deadline_s:.0f}s passed"
            self.end(record, TaskStatus.TIMED_OUT, reason)
            return True
        return False

    def end(self, record: TaskRecord, status: TaskStatus, reason: str) -> None:
        """End a task without a result (limits, unrecoverable errors), with a clear reason."""
        if self.store.set_status(record.id, status, error=reason):
            self._finish(record)

    def _finish(self, record: TaskRecord) -> None:
        following = self.store.release_session(record)
        if following:
            self.enqueue(following, 0)


def _tool_calls(message: AgentMessage) -> list[ToolCall]:
    formatted = message.formatted if isinstance(message.formatted, dict) else {}
    return [ToolCall.model_validate(c) for c in formatted.get("tool_calls") or []]


def _usage(message: AgentMessage) -> dict[str, int]:
    """The model's token usage, which the agent keeps in the reply's `extra_info`."""
    extra = message.extra_info if isinstance(message.extra_info, dict) else {}
    return extra.get("usage") or {}


def _text(message: AgentMessage) -> str:
    return message.content if isinstance(message.content, str) else str(message.content)
