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


def test_a_sentinel_stack_adds_a_replica_and_three_sentinels_of_its_redis(tmp_path: Path) -> None:
    stack = LocalStack(run_dir=tmp_path, redis_sentinel=True)
    commands = stack.commands()
    assert stack.sentinels is not None
    names = list(commands)
    assert names[:5] == ["redis", "redis_replica", "sentinel_1", "sentinel_2", "sentinel_3"]
    replica = commands["redis_replica"]
    assert replica[replica.index("--port") + 1] == str(stack.sentinels.replica_port)
    assert replica[-3:] == ["--replicaof", "127.0.0.1", str(stack.ports.redis)]
    assert replica[replica.index("--dir") + 1] != str(tmp_path)  # its own AOF
    for name, port in zip(names[2:5], stack.sentinels.sentinel_ports, strict=True):
        config = Path(commands[name][-1]).read_text()
        assert f"port {port}\n" in config
        assert f"sentinel monitor taskyard 127.0.0.1 {stack.ports.redis} 2\n" in config
    ports = ",".join(f"127.0.0.1:{port}" for port in stack.sentinels.sentinel_ports)
    env = stack.env()
    assert (env["TASKYARD_REDIS_SENTINELS"], env["TASKYARD_REDIS_MASTER"]) == (ports, "taskyard")
    assert stack.master_url == stack.redis_url  # no sentinel answers: the primary's URL


def test_a_plain_stack_has_no_sentinels(tmp_path: Path) -> None:
    stack = LocalStack(run_dir=tmp_path)
    assert not {"redis_replica", "sentinel_1"} & set(stack.commands())
    assert "TASKYARD_REDIS_SENTINELS" not in stack.env()
