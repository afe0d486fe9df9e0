"""What one agent worker process holds: its event loop and, on it, the store, the model
client's connection pool, the cancel watch and the warm agents; `run_step` is how a Celery
job (a greenlet under the gevent pool) hands a step to the loop and waits for it."""

from __future__ import annotations

import asyncio
import logging

import aiohttp
from celery import Celery

from services.agent_worker.children import ChildStarter
from services.agent_worker.compaction import Compactor
from services.agent_worker.live_agents import LiveAgents
from services.agent_worker.model_calls import ObservedModel
from services.agent_worker.retries import RetryLater
from services.agent_worker.step import StepRunner
from services.agent_worker.sweep import Sweeper
from taskyard.agentkit.agents import AsyncAgent, build_agent, default_llm
from taskyard.agentkit.spec import AgentSpec
from taskyard.plumbing.loop import LoopThread
from taskyard.plumbing.settings import AgentWorkerSettings
from taskyard.plumbing.tenant_credentials import TenantCredentials
from taskyard.runtime.cancel import CancelWatch
from taskyard.runtime.events import EventKind
from taskyard.runtime.jobs import AgentStepJob, ChildJob, Job, WebhookJob, envelope
from taskyard.runtime.schedules.runner import ScheduleRunner
from taskyard.runtime.store import TaskStore
from taskyard.runtime.webhooks import Deliverer, Outcome

__all__ = ["AgentRuntime", "call_signer", "worker_agent"]

log = logging.getLogger("taskyard.agent_worker")


def call_signer(settings: AgentWorkerSettings) -> TenantCredentials | None:
    """The signer of model calls' tenant credentials, or None (with a warning) without a secret."""
    secret = settings.llm_token_secret.get_secret_value()
    if not secret:
        log.warning(
            "TASKYARD_LLM_TOKEN_SECRET is not set: model calls carry the one key "
            "TASKYARD_LLM_API_KEY, so the proxy counts and limits every tenant as one"
        )
        return None
    return TenantCredentials(secret, settings.llm_token_ttl_s)


def worker_agent(
    spec: AgentSpec,
    settings: AgentWorkerSettings,
    http: aiohttp.ClientSession,
    credentials: TenantCredentials | None,
) -> AsyncAgent:
    """The agent a spec asks for, its model calls signed for their task and observed."""
    llm = ObservedModel(default_llm(spec, settings, http), credentials)
    return build_agent(spec, settings, llm=llm)


class AgentRuntime:
    """Started once per worker process, on first use (after gevent has patched the process)."""

    def __init__(self, settings: AgentWorkerSettings, celery: Celery) -> None:
        self.settings = settings
        self.celery = celery
        self.credentials = call_signer(settings)
        self.loop = LoopThread("agent-loop")
        self.runner: StepRunner = self.loop.run(self._start())

    async def _start(self) -> StepRunner:
        settings = self.settings
        self.store = TaskStore.from_settings(settings, "taskyard-agent-worker")
        connector = aiohttp.TCPConnector(limit=settings.llm_max_connections)
        self.http = aiohttp.ClientSession(connector=connector)
        self.cancels = CancelWatch(self.store.r)
        self._listening = asyncio.create_task(self.cancels.listen())
        agents = LiveAgents(self._build, max_sessions=settings.agent_session_cache)
        compactor = Compactor(self.store, settings, self.http)
        runner = StepRunner(self.store, settings, agents, self.cancels, self.celery, compactor)
        self.webhooks = Deliverer(self.store, settings)
        self.sweeper = Sweeper(self.store, settings, runner, self.celery, self.webhooks)
        self.children = ChildStarter(self.store, settings, self.celery)
        self.schedules = ScheduleRunner(self.store, self.celery, settings)
        return runner

    def _build(self, spec: AgentSpec) -> AsyncAgent:
        return worker_agent(spec, self.settings, self.http, self.credentials)

    def send(self, jobs: list[Job]) -> None:
        """Put the sweep's re-sent jobs on the broker as the commits put theirs (`envelope`,
        then one script on the loop) rather than through Celery's producer: under gevent that
        costs 616 us of CPU a job, this 203 (measured; docs/benchmarks.md). The envelopes are
        sealed here, in the caller's context, so each carries the job's trace."""
        if jobs:
            sealed = [envelope(self.celery, job) for job in jobs]
            self.loop.run(self.store.push(sealed))

    def run_step(self, job: AgentStepJob) -> None:
        self.loop.run(self.runner.run(job))

    def fail(self, job: AgentStepJob, reason: str) -> None:
        self.loop.run(self.runner.fail(job, reason))

    def waiting(self, job: AgentStepJob, retry: RetryLater) -> None:
        """Say on the task's stream why it waits, when the wait is the tenant's rate limit."""
        if retry.notice is not None:
            self.loop.run(self.store.publish(job.task_id, EventKind.RATE_LIMITED, retry.notice))

    def sweep(self) -> list[Job]:
        return self.loop.run(self.sweeper.run())

    def run_schedules(self) -> None:
        self.loop.run(self.schedules.tick())

    def start_child(self, job: ChildJob) -> None:
        self.loop.run(self.children.start(job))

    def deliver_webhooks(self, job: WebhookJob) -> Outcome:
        return self.loop.run(self.webhooks.deliver(job.task_id))

    def close(self) -> None:
        self.loop.run(self._stop())
        self.loop.close()

    async def _stop(self) -> None:
        self._listening.cancel()
        await self.webhooks.close()
        await self.http.close()
        await self.store.close()
