"""The local stack's Redis (devstack/stack.py): run with the fsync policy asked for, and a
(re)start returns only once Redis answers, so fault tests and the chaos run can use it at once."""

from __future__ import annotations

from pathlib import Path

import docker
import redis

from devstack.stack import LocalStack, remove_sandboxes
from shared.sandbox.docker import WORKER_LABEL


def test_redis_restarts_with_its_fsync_policy_and_answers_at_once(tmp_path: Path) -> None:
    stack = LocalStack(run_dir=tmp_path, redis_appendfsync="always")
    stack.argvs["redis"] = stack.commands()["redis"]  # as if started, then killed
    stack.log_path("redis").touch()
    client = redis.Redis.from_url(stack.redis_url, decode_responses=True)
    try:
        stack.restart("redis")  # a first start: the same command line, waited on
        assert client.config_get("appendfsync") == {"appendfsync": "always"}
        client.set("kept", "1")
        stack.kill("redis")
        stack.restart("redis")
        assert client.get("kept") == "1"  # answering, its AOF loaded
    finally:
        client.close()
        stack.stop()


def test_the_sandboxes_a_stack_leaves_are_removed_by_its_label(sandbox_image: str) -> None:
    client = docker.from_env()
    try:
        ours = [client.containers.create(sandbox_image, labels={WORKER_LABEL: "stack-ours"})
                for _ in range(2)]  # fmt: skip
        other = client.containers.create(sandbox_image, labels={WORKER_LABEL: "stack-other"})
        remove_sandboxes("stack-ours")
        left = {c.id for c in client.containers.list(all=True)}
        assert not left & {c.id for c in ours}
        assert other.id in left
        other.remove(force=True)
    finally:
        client.close()
