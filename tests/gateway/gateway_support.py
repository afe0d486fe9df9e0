"""Helpers the gateway tests share."""

from __future__ import annotations

import base64
import json
import os
import sys
from pathlib import Path

import redis

from devstack.procs import Processes, free_port
from taskyard.plumbing.settings import GatewaySettings
from taskyard.runtime.jobs import AgentStepJob


def queued_steps(settings: GatewaySettings) -> list[tuple[str, int]]:
    """(task id, step) of each agent step job on the broker, oldest first."""
    broker = redis.Redis.from_url(settings.broker_url)
    # kombu pushes on the left and pops on the right: oldest last in the list
    bodies = [json.loads(m)["body"] for m in reversed(broker.lrange("agent", 0, -1))]
    jobs = [AgentStepJob.model_validate(json.loads(base64.b64decode(b))[0][0]) for b in bodies]
    return [(job.task_id, job.step) for job in jobs]


class GatewayProcess:
    """The gateway as its own process (uvicorn, as deployed) on a free loopback port, against
    the given Redis, its output in `log`; `with GatewayProcess(redis_url, log) as url: ...`."""

    def __init__(self, redis_url: str, log: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "TASKYARD_REDIS_URL": f"{redis_url}/0",
            "TASKYARD_BROKER_URL": f"{redis_url}/1",
            "TASKYARD_RESULT_BACKEND": f"{redis_url}/2",
            "TASKYARD_API_KEYS": "key-a=tenant-a,key-b=tenant-b",
            # No tool worker answers file requests here: do not keep a fuzzer waiting.
            "TASKYARD_FILES_TIMEOUT_S": "0.05",
        }
        self.procs = Processes(log_dir=log.parent)
        self.name = log.stem

    def __enter__(self) -> str:
        argv = [sys.executable, "-m", "uvicorn", "services.gateway.app:app",
                "--host", "127.0.0.1", "--port", str(self.port), "--no-access-log"]  # fmt: skip
        self.procs.start(self.name, argv, self.env).wait_http(f"{self.url}/readyz", timeout_s=30)
        return self.url

    def __exit__(self, *exc: object) -> None:
        self.procs.stop_all()
