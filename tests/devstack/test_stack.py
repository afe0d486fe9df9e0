"""The local stack (devstack/stack.py): Redis runs with the fsync policy asked for, and a
(re)start returns only once Redis answers, so fault tests and the chaos run can use it at once;
a service whose port another server holds fails the start instead of that server answering for
it; on hosts, every service binds its host's address and keeps its files in its host's /tmp."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import docker
import pytest
import redis

from devstack.hosts import Host
from devstack.procs import ChildFailed, free_port
from devstack.stack import LocalStack, StackPorts, remove_sandboxes
from taskyard.sandbox.docker.provider import WORKER_LABEL


def test_redis_restarts_with_its_fsync_policy_and_answers_at_once(tmp_path: Path) -> None:
    stack = LocalStack(run_dir=tmp_path, redis_appendfsync="always")
    stack.argvs["redis"] = stack.commands()["redis"]  # as if started, then killed
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


class _AnswersEverything(BaseHTTPRequestHandler):
    """A server answering 200 to any GET, as a metrics server does."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def squatter() -> Iterator[int]:
    """A port another server holds, answering 200 to every GET."""
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), _AnswersEverything)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_a_gateway_whose_port_another_server_holds_fails_the_start(
    tmp_path: Path, squatter: int
) -> None:
    stack = LocalStack(
        ports=StackPorts(gateway=squatter), run_dir=tmp_path, sandbox_backend="local"
    )
    try:
        with pytest.raises(ChildFailed, match="address already in use"):
            stack.start()  # the other server answers /readyz: the gateway's own line is awaited
        assert not stack.procs  # and everything it started is stopped
    finally:
        stack.stop()  # (a start that wrongly went through leaves nothing running either)


def test_a_redis_whose_port_another_redis_holds_fails_the_start(
    tmp_path: Path, redis_server: str
) -> None:
    taken = int(redis_server.rsplit(":", 1)[1])
    stack = LocalStack(ports=StackPorts(redis=taken), run_dir=tmp_path)
    stack.argvs["redis"] = stack.commands()["redis"]  # as if started, then killed
    try:
        with pytest.raises(ChildFailed, match="Address already in use"):
            stack.restart("redis")  # the other Redis answers PING: its own line is awaited
    finally:
        stack.stop()


def test_the_sandboxes_a_stack_leaves_are_removed_by_its_label(sandbox_image: str) -> None:
    client = docker.from_env()
    # Labels of this run's own: another test run on the engine keeps its containers.
    mine, theirs = (f"stack-{name}-{uuid.uuid4().hex[:8]}" for name in ("ours", "other"))
    other = client.containers.create(sandbox_image, labels={WORKER_LABEL: theirs})
    try:
        ours = [client.containers.create(sandbox_image, labels={WORKER_LABEL: mine})
                for _ in range(2)]  # fmt: skip
        remove_sandboxes(mine)
        left = {c.id for c in client.containers.list(all=True)}
        assert not left & {c.id for c in ours}
        assert other.id in left
    finally:
        other.remove(force=True)
        client.close()


def test_on_hosts_each_service_binds_its_hosts_address_and_keeps_files_there(
    tmp_path: Path,
) -> None:
    stack = LocalStack(run_dir=tmp_path, agent_workers=2, tool_workers=2)
    names = list(stack.commands())
    assert names[4:9] == ["agent_worker", "agent_worker_2", "engine_proxy", "tool_worker",
                          "tool_worker_2"]  # fmt: skip
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
    engine = f"tcp://{stack.address('engine_proxy')}:{stack.ports.engine_proxy}"
    assert stack._env_of("tool_worker_2")["DOCKER_HOST"] == engine


def test_tool_workers_reach_the_engine_through_the_proxy_each_with_its_own_token(
    tmp_path: Path,
) -> None:
    stack = LocalStack(run_dir=tmp_path, tool_workers=2)
    proxy = stack._env_of("engine_proxy")
    workers = {name: stack._env_of(name) for name in ("tool_worker", "tool_worker_2")}
    address = f"tcp://127.0.0.1:{stack.ports.engine_proxy}"
    assert proxy["TASKYARD_ENGINE_PROXY_LISTEN"] == address
    callers = dict(pair.split("=") for pair in proxy["TASKYARD_ENGINE_PROXY_CALLERS"].split(","))
    assert set(callers) == set(workers)
    for name, env in workers.items():
        assert env["DOCKER_HOST"] == address
        assert env["TASKYARD_SANDBOX_ENGINE_TOKEN"] == callers[name]
        assert "TASKYARD_ENGINE_PROXY_CALLERS" not in env
    assert callers["tool_worker"] != callers["tool_worker_2"]
    for name in ("gateway", "agent_worker"):
        assert "TASKYARD_SANDBOX_ENGINE_TOKEN" not in stack._env_of(name)
    assert "engine_proxy" not in LocalStack(run_dir=tmp_path, sandbox_backend="local").commands()


def test_without_the_proxy_the_tool_workers_get_the_engine_itself(tmp_path: Path) -> None:
    # What the benchmarks compare the proxy against: no proxy started, no address, no token.
    stack = LocalStack(run_dir=tmp_path, engine_proxy=False)
    assert "engine_proxy" not in stack.commands()
    env = stack._env_of("tool_worker")
    assert "TASKYARD_SANDBOX_ENGINE_TOKEN" not in env
    assert env.get("DOCKER_HOST") == stack.env().get("DOCKER_HOST")  # the stack's own engine


def test_a_root_stacks_tool_workers_start_confined_when_they_use_the_proxy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def confined(name: str = "tool_worker", backend: str = "docker", proxy: bool = True) -> bool:
        stack = LocalStack(run_dir=tmp_path, sandbox_backend=backend, engine_proxy=proxy)
        return stack.confined(name)

    monkeypatch.setattr("devstack.stack.can_confine", lambda: True)
    assert confined() and confined("tool_worker_2") is False  # one tool worker by default
    assert not confined(proxy=False)  # it needs the engine itself
    assert not confined(backend="local")  # the namespace sandbox needs root
    assert not confined("agent_worker")
    monkeypatch.setattr("devstack.stack.can_confine", lambda: False)
    assert not confined()  # a developer's own user: the worker is that user


def test_on_hosts_a_service_without_one_is_refused(tmp_path: Path) -> None:
    hosts = {name: Host(name, "198.18.7.2", "ns", 1) for name in ("redis", "model", "proxy")}
    stack = LocalStack(run_dir=tmp_path, hosts=hosts)
    with pytest.raises(ValueError, match="gateway has no host: give every service one, or none"):
        stack.start()
    assert stack.procs == {}


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


def test_a_plain_stack_has_no_sentinels_and_a_stack_on_hosts_none_at_all(
    tmp_path: Path,
) -> None:
    stack = LocalStack(run_dir=tmp_path)
    assert not {"redis_replica", "sentinel_1"} & set(stack.commands())
    assert "TASKYARD_REDIS_SENTINELS" not in stack.env()
    hosts = {"redis": Host("redis", "198.18.7.2", "ns", 1)}
    with pytest.raises(ValueError, match="replica and sentinels on loopback"):
        LocalStack(run_dir=tmp_path, redis_sentinel=True, hosts=hosts)
