"""The jobs an agent worker sends outside a commit (the sweep's re-sends) go on the broker
as the commits put theirs: sealed envelopes, one push, each on its queue and carrying its
payload."""

from __future__ import annotations

import base64
import json

import redis

from services.agent_worker.runtime import AgentRuntime
from taskyard.plumbing import keys
from taskyard.plumbing.celery_app import make_celery
from taskyard.plumbing.settings import AgentWorkerSettings
from taskyard.runtime.jobs import AgentStepJob, WebhookJob


def test_jobs_sent_outside_a_commit_reach_their_queues_whole(redis_server: str) -> None:
    settings = AgentWorkerSettings(redis_url=f"{redis_server}/0", broker_url=f"{redis_server}/1")
    broker = redis.Redis.from_url(f"{redis_server}/1")
    broker.delete(keys.AGENT_QUEUE, keys.WEBHOOK_QUEUE)
    runtime = AgentRuntime(settings, make_celery(settings))
    step = AgentStepJob(task_id="t1", step=0, tenant="demo", session_id="s1")
    hooks = WebhookJob(task_id="t0")
    try:
        runtime.send([step, hooks])
        runtime.send([])  # nothing to send: nothing sent
    finally:
        runtime.close()
    [sent_step] = broker.lrange(keys.AGENT_QUEUE, 0, -1)
    [sent_hooks] = broker.lrange(keys.WEBHOOK_QUEUE, 0, -1)
    broker.close()
    for sent, job, task in ((sent_step, step, keys.AGENT_STEP_TASK),
                            (sent_hooks, hooks, keys.WEBHOOK_TASK)):  # fmt: skip
        message = json.loads(sent)
        args, _, _ = json.loads(base64.b64decode(message["body"]))
        assert message["headers"]["task"] == task and args == [job.payload()]
