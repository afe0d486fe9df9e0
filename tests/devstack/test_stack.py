"""The local stack (devstack/stack.py): Redis runs with the fsync policy asked for, and a
(re)start returns only once Redis answers, so fault tests and the chaos run can use it at once;
on hosts, every service binds its host's address and keeps its files in its host's /tmp."""

from __future__ import annotations

from pathlib import Path

import docker
import pytest
import redis

from devstack.hosts import Host
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


def test_on_hosts_each_service_binds_its_hosts_address_and_keeps_files_there(
    tmp_path: Path,
) -> None:
    stack = LocalStack(run_dir=tmp_path, agent_workers=2, tool_workers=2)
    names = list(stack.commands())
    assert names[4:8] == ["agent_worker", "agent_worker_2", "tool_worker", "tool_worker_2"]
    stack.hosts = {name: Host(name, f"198.18.7.{i}", f"ns-{name}", 1)
                   for i, name in enumerate(names, 2)}  # fmt: skip
    commands = stack.commands()
    redis_argv, gateway_argv = commands["redis"], commands["gateway"]
    assert redis_argv[redis_argv.index("--bind") + 1] == "198.18.7.2"
    assert redis_argv[redis_argv.index("--dir") + 1] == "/tmp"  # its host's own
    assert gateway_argv[gateway_argv.index("--host") + 1] == stack.address("gateway")
    assert commands["agent_worker_2"][commands["agent_worker_2"].index("-n") + 1] == "agent2@%h"
    assert stack.env()["TASKYARD_REDIS_URL"] == f"redis://198.18.7.2:{stack.ports.redis}/0"
    assert stack.env()["TASKYARD_LLM_BASE_URL"] == f"{stack.proxy_url}/v1"


def test_on_hosts_a_service_without_one_is_refused(tmp_path: Path) -> None:
    hosts = {name: Host(name, "198.18.7.2", "ns", 1) for name in ("redis", "model", "proxy")}
    stack = LocalStack(run_dir=tmp_path, hosts=hosts)
    with pytest.raises(ValueError, match="gateway has no host: give every service one, or none"):
        stack.start()
    assert stack.procs == {}
