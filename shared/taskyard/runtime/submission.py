"""A task's way in, one for every door: what a submission may ask for (`TaskRequest`, the
gateway's `POST /v1/tasks` body and a schedule's task alike), whether this deployment offers
what it names (`check_offered`), the deadline its tenant allows it (`task_deadline`), and
`submit`, which stores the task with its first step and stops the task it displaced from its
session (`if_session_busy`)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Literal

from celery import Celery
from pydantic import BaseModel, ConfigDict, Field

from taskyard.agentkit.actions.web import AddressPolicy
from taskyard.agentkit.agents import AGENTS
from taskyard.agentkit.agents.as_tool import tool_schemas
from taskyard.agentkit.registry import RegistryError
from taskyard.agentkit.spec import AgentSpec, BusyPolicy, WebhookSpec
from taskyard.errors import TaskyardError
from taskyard.files.info import FileInfo
from taskyard.plumbing.settings import SubmissionSettings, TaskSettings
from taskyard.runtime.cancel import stop
from taskyard.runtime.jobs import AgentStepJob, envelope
from taskyard.runtime.store import Created, TaskStore
from taskyard.runtime.task import SESSION_ID_MAX, SESSION_ID_PATTERN, TaskRecord
from taskyard.runtime.webhooks import refusal, subscription

__all__ = [
    "SubmissionRefused", "TaskRequest", "check_offered", "check_webhook", "submit",
    "task_deadline",
]  # fmt: skip


class SubmissionRefused(TaskyardError):
    """A request that names what this deployment does not offer or allow: `loc` is the
    field, within the request, that says it."""

    def __init__(self, loc: Sequence[str], reason: str) -> None:
        super().__init__(reason)
        self.loc = list(loc)
        self.reason = reason


class TaskRequest(BaseModel):
    """What a task asks for, checked the same wherever it comes from."""

    model_config = ConfigDict(extra="forbid")

    input: str = Field(min_length=1, max_length=200_000, description="The user's message.")
    session_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=SESSION_ID_MAX,
        pattern=SESSION_ID_PATTERN,
        description="Tasks of one session share memory and interpreter; a new one if unset.",
    )
    agent: AgentSpec = Field(default_factory=AgentSpec)
    if_session_busy: BusyPolicy | Literal["wait"] | None = Field(
        default=None,
        description="While the session runs another task: `enqueue` (wait its turn), `reject` "
        "(409), `interrupt` (that task ends cancelled, its committed steps kept in the "
        "session's memory, and this one starts) or `rollback` (as interrupt, and that task's "
        "messages are removed from the session's memory first). Unset: the agent's "
        "`if_session_busy`, else `enqueue`; `wait` is the old name of `enqueue`.",
    )
    webhook: WebhookSpec | None = Field(
        default=None, description="POST its state changes there (Standard Webhooks, signed)."
    )

    def busy_policy(self) -> BusyPolicy:
        """The policy in force: the request's own, else its agent's, else `enqueue`."""
        asked = self.if_session_busy or self.agent.if_session_busy or "enqueue"
        return "enqueue" if asked == "wait" else asked

    def record(self, tenant: str, session_id: str, files: Sequence[FileInfo] = ()) -> TaskRecord:
        """The task this request makes, in `session_id` (the request's, or a new one)."""
        return TaskRecord(tenant=tenant, session_id=session_id, input=self.input,
                          spec=self.agent, webhook=self.webhook, files=list(files))  # fmt: skip


def check_offered(spec: AgentSpec) -> None:
    """Unknown tool or agent names are the caller's error (`SubmissionRefused`), not a task
    that fails later."""
    try:
        _offered(tuple(spec.tools))
        if spec.agent is not None:
            AGENTS.get(spec.agent)
    except RegistryError as exc:
        field = "agent" if spec.agent is not None and spec.agent not in AGENTS else "tools"
        raise SubmissionRefused(["agent", field], str(exc)) from exc


def task_deadline(spec: AgentSpec, tenant: str, settings: TaskSettings) -> float:
    """Seconds a new task of `tenant` may run: its spec's `deadline_s`, else the default; never
    past the tenant's maximum (a spec asking for more is `SubmissionRefused`)."""
    most = settings.max_deadline_s(tenant)
    if spec.deadline_s is None:
        return min(settings.task_deadline_s, most)
    if spec.deadline_s > most:
        why = f"deadline_s {spec.deadline_s:.15g} is above this tenant's maximum of {most:.15g} s"
        raise SubmissionRefused(["agent", "deadline_s"], why)
    return spec.deadline_s


@lru_cache(maxsize=1024)
def _offered(tools: tuple[str, ...]) -> None:
    """Raises `RegistryError` unless every name is offered. Building the tools' schemas took
    over a quarter of a submission's CPU; plugins register at start-up, so a list that passed
    once passes again (a failure, an exception, is not cached)."""
    tool_schemas(list(tools))


async def submit(
    store: TaskStore,
    celery: Celery,
    settings: SubmissionSettings,
    record: TaskRecord,
    busy: BusyPolicy,
    idempotency_key: str | None = None,
    fingerprint: str = "",
) -> Created:
    """Store the task with its first step's job (pushed at once if it holds its session, else
    when its turn comes), answered once as many replicas hold it as the settings ask; stop
    the task it interrupted or rolled back, if any. Fixes `record.deadline_s`.
    `SubmissionRefused` for a deadline over the tenant's maximum, or a webhook URL the
    address policy refuses."""
    record.deadline_s = deadline_s = task_deadline(record.spec, record.tenant, settings)
    first = AgentStepJob.first(record)
    created = await store.create(
        record, envelope(celery, first), idempotency_key, fingerprint, busy,
        deadline_s=deadline_s, stall_s=settings.stall_s,
        extra=await _webhook_fields(record, celery, settings),
        replicas=settings.accept_replicas, replicas_timeout_ms=settings.gateway_accept_wait_ms,
    )  # fmt: skip
    if created.displaced is not None:
        await stop(store, celery, created.displaced)
    return created


async def check_webhook(webhook: WebhookSpec | None, settings: SubmissionSettings) -> None:
    """`SubmissionRefused` for a webhook URL the address policy refuses."""
    policy = AddressPolicy(allow_private=settings.webhook_allow_private)
    if webhook is not None and (why := await refusal(webhook.url, policy)):
        raise SubmissionRefused(["webhook", "url"], why)


async def _webhook_fields(
    record: TaskRecord, celery: Celery, settings: SubmissionSettings
) -> dict[str, str]:
    """The task's webhook subscription, once its URL passes the address policy."""
    if record.webhook is None:
        return {}
    await check_webhook(record.webhook, settings)
    return subscription(record, celery)
