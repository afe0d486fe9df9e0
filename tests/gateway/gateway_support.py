"""Helpers the gateway tests share."""

from __future__ import annotations

import base64
import json

import redis

from shared.jobs import AgentStepJob
from shared.settings import Settings


def queued_steps(settings: Settings) -> list[tuple[str, int]]:
    """(task id, step) of each agent step job on the broker, oldest first."""
    broker = redis.Redis.from_url(settings.broker_url)
    # kombu pushes on the left and pops on the right: oldest last in the list
    bodies = [json.loads(m)["body"] for m in reversed(broker.lrange("agent", 0, -1))]
    jobs = [AgentStepJob.model_validate(json.loads(base64.b64decode(b))[0][0]) for b in bodies]
    return [(job.task_id, job.step) for job in jobs]
