"""The local stack: Redis and every service as processes on this machine.

Used by `make up` (through `taskyard up`) and by the end-to-end tests. The model is the scripted
OpenAI-compatible upstream unless `upstreams` points at a real one (vLLM, ...). Every service
runs on loopback, or each on a host of its own (`hosts`, from `devstack.hosts`): the same
commands, each binding its host's address and reaching the others by theirs, keeping its files
in its host's own /tmp.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import docker
import docker.errors

from devstack import redis_server
from devstack.confine import can_confine, confined_argv
from devstack.engine_proxy import EngineAccess, engine_proxy_argv
from devstack.hosts import Host
from devstack.llm import proxy_argv, scripted_model_argv
from devstack.procs import Child, Processes, free_port
from devstack.sentinel import SentinelGroup
from taskyard.plumbing import keys
from taskyard.plumbing.settings import parse_api_keys
from taskyard.sandbox.docker.provider import WORKER_LABEL

_LOOPBACK = "127.0.0.1"

__all__ = ["LocalStack", "StackPorts"]

_CELERY_FLAGS = ["--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "INFO"]
# The tenant tokens' secret goes to these services only: never to a tool worker, whose
# sandboxes run the models' code, nor to the gateway, which has no use for it.
_TOKEN_SECRET = "TASKYARD_LLM_TOKEN_SECRET"
_HOLD_TOKEN_SECRET = ("proxy", "agent_worker", "beat")  # names, or the start of names
# What each service with a port of its own logs once it is bound (before it answers a probe).
_BOUND = {"model": "listening on", "proxy": "listening on", "gateway": "Uvicorn running on",
          "engine_proxy": "listening on"}  # fmt: skip


@dataclass
class StackPorts:
    redis: int = field(default_factory=free_port)
    model: int = field(default_factory=free_port)
    proxy: int = field(default_factory=free_port)
    engine_proxy: int = field(default_factory=free_port)
    gateway: int = field(default_factory=free_port)
    # Prometheus metrics of the services without an HTTP port of their own.
    agent_metrics: int = field(default_factory=free_port)
    tool_metrics: int = field(default_factory=free_port)
    beat_metrics: int = field(default_factory=free_port)


@dataclass
class LocalStack:
    """Starts Redis, the scripted model, the LLM proxy, the gateway and both workers."""

    ports: StackPorts = field(default_factory=StackPorts)
    run_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="taskyard-")))
    api_keys: str = "dev-key=demo"  # the gateway's TASKYARD_API_KEYS
    # Redis's AOF fsync policy: "everysec" (Redis's default) or "always" (an acknowledged
    # write survives a SIGKILL of Redis; see docs/deployment.md, Redis durability).
    redis_appendfsync: str = "everysec"
    # Redis through Sentinel: a replica of the stack's Redis and three sentinels, and every
    # service reaching the master they name (`devstack.sentinel`), so the primary can be killed.
    redis_sentinel: bool = False
    sandbox_backend: str = "docker"
    upstreams: str | None = None  # real OpenAI-compatible upstreams; scripted model if None
    model_tokens_per_s: float = 0  # the scripted model's stream pace (0: as fast as it can)
    gateway_workers: int = 1
    agent_pool: str = "gevent"  # "threads" is the old configuration, kept for the benchmarks
    agent_concurrency: int = 1000
    # Agent workers on the same queues (agent_worker, agent_worker_2, ...): stateless, any
    # of them takes any step.
    agent_workers: int = 1
    tool_concurrency: int = 4
    # Tool workers on the same queues, as `docker compose up --scale tool_worker=N` runs them:
    # identical but for their Celery node names (tool_worker, tool_worker_2, ...).
    tool_workers: int = 1
    tool_queues: tuple[str, ...] = ("tools.IPythonInterpreter", "tools.WebBrowser", "tools.mcp")
    extra_env: dict[str, str] = field(default_factory=dict)  # more TASKYARD_* settings
    # The docker backend's tool workers reach the engine through the engine proxy; False
    # gives them the engine itself (what the benchmarks compare the proxy against).
    engine_proxy: bool = True
    # Where each service runs, by its name in `commands()`: a host of its own (set every
    # service's, or none: then all run on this machine's loopback).
    hosts: Mapping[str, Host] = field(default_factory=dict)
    # Signs the agent workers' model calls for their tenants (a fresh one per stack).
    token_secret: str = field(default_factory=lambda: secrets.token_hex(32))
    argvs: dict[str, list[str]] = field(default_factory=dict)  # of every service started
    processes: Processes = field(init=False)
    sentinels: SentinelGroup | None = field(init=False, default=None)
    # Each tool worker's token for the engine proxy (docker backend), by process name.
    engine_tokens: dict[str, str] = field(init=False)

    def __post_init__(self) -> None:
        self.processes = Processes(log_dir=self.run_dir)
        self.engine_tokens = dict(EngineAccess.for_workers(self.tool_worker_nodes(), "").tokens)
        if self.redis_sentinel:
            if self.hosts:
                raise ValueError("redis_sentinel runs its replica and sentinels on loopback")
            self.sentinels = SentinelGroup(self.run_dir, self.ports.redis)

    @property
    def procs(self) -> dict[str, Child]:
        """The services running now, by name."""
        return self.processes.children

    @property
    def api_key(self) -> str:
        """The first key of `api_keys`: the one the demo task and the tests use."""
        return next(iter(parse_api_keys(self.api_keys)))

    def address(self, service: str) -> str:
        """The address `service` binds, and the others reach it by."""
        return self._host(service).address if self.hosts else _LOOPBACK

    def data_dir(self, service: str) -> Path:
        """Where `service` keeps its files: its host's own /tmp, else the run directory."""
        return self._host(service).data_dir if self.hosts else self.run_dir

    def _host(self, service: str) -> Host:
        if service not in self.hosts:
            raise ValueError(f"{service} has no host: give every service one, or none")
        return self.hosts[service]

    @property
    def gateway_url(self) -> str:
        return f"http://{self.address('gateway')}:{self.ports.gateway}"

    @property
    def redis_url(self) -> str:
        return f"redis://{self.address('redis')}:{self.ports.redis}"

    @property
    def proxy_url(self) -> str:
        return f"http://{self.address('proxy')}:{self.ports.proxy}"

    @property
    def _proxied(self) -> bool:
        return self.sandbox_backend == "docker" and self.engine_proxy

    @property
    def engine_access(self) -> EngineAccess:
        """How the tool workers reach the Docker engine: through the engine proxy, each with
        its own token."""
        address = f"tcp://{self.address('engine_proxy')}:{self.ports.engine_proxy}"
        return EngineAccess(address, self.engine_tokens)

    @property
    def model_url(self) -> str:
        """The scripted model's root URL (its /scripted/config, /scripted/stats)."""
        return f"http://{self.address('model')}:{self.ports.model}"

    @property
    def master_url(self) -> str:
        """The Redis that takes writes now: under Sentinel, the master the sentinels name
        (after a failover, the promoted replica); else `redis_url`."""
        found = self.sentinels.master_address() if self.sentinels else None
        return f"redis://{found[0]}:{found[1]}" if found else self.redis_url

    @property
    def metrics_urls(self) -> dict[str, str]:
        """Where each service serves its Prometheus metrics."""
        own = {name: f"http://{self.address(name)}:{port}/metrics"
               for name, port in self._metrics_ports()}  # fmt: skip
        return {
            "gateway": f"{self.gateway_url}/metrics",
            "proxy": f"{self.proxy_url}/metrics",
            **own,
        }

    def _metrics_ports(self) -> list[tuple[str, int]]:
        ports = self.ports
        return [("agent_worker", ports.agent_metrics), ("tool_worker", ports.tool_metrics),
                ("beat", ports.beat_metrics)]  # fmt: skip

    def env(self) -> dict[str, str]:
        """The environment every service starts with (`_spawn` adds each one's own)."""
        upstreams = self.upstreams or f"{self.model_url}/v1"
        return {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "TASKYARD_REDIS_URL": f"{self.redis_url}/0",
            "TASKYARD_BROKER_URL": f"{self.redis_url}/0",
            "TASKYARD_RESULT_BACKEND": f"{self.redis_url}/2",
            "TASKYARD_API_KEYS": self.api_keys,
            "TASKYARD_LLM_BASE_URL": f"{self.proxy_url}/v1",
            "TASKYARD_PROXY_UPSTREAMS": upstreams,
            "TASKYARD_SANDBOX_BACKEND": self.sandbox_backend,
            # The stack's own: a (re)started tool worker removes every sandbox of its label.
            "TASKYARD_SANDBOX_WORKER_LABEL": self.worker_label,
            # Everything here is on loopback or a private network, webhook receivers too.
            "TASKYARD_WEBHOOK_ALLOW_PRIVATE": "true",
            _TOKEN_SECRET: self.token_secret,
            **(self.sentinels.env() if self.sentinels else {}),
            **self.extra_env,
        }

    def start(self) -> LocalStack:
        for name in self.commands():
            self.address(name)  # before anything starts: each has a host, or none has
        self.run_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._start_all()
        except BaseException:
            self.stop()
            raise
        return self

    def _start_all(self) -> None:
        for name, argv in self.commands().items():
            self._spawn(name, argv)
            if name == "engine_proxy":  # a tool worker checks its engine as it starts
                self._wait_ready(name)
        for name in self.procs:
            self._wait_ready(name)

    def commands(self) -> dict[str, list[str]]:
        """Each service's command line, in start order (Redis first, then its replica and
        sentinels if any)."""
        py, at = sys.executable, self.address
        server = redis_server.argv(
            self.ports.redis, self.data_dir("redis"), at("redis"), self.redis_appendfsync
        )
        model = scripted_model_argv("--tokens-per-s", str(self.model_tokens_per_s),
                                    host=at("model"), port=self.ports.model)  # fmt: skip
        proxy = proxy_argv(host=at("proxy"), port=self.ports.proxy)  # upstreams from env()
        # The only process that opens the engine's socket; the tool workers reach it through
        # this proxy (its settings from `_env_of`).
        engine = {"engine_proxy": engine_proxy_argv()} if self._proxied else {}
        gateway = [py, "-m", "uvicorn", "services.gateway.app:app", "--host", at("gateway"),
                   "--port", str(self.ports.gateway), "--no-access-log",
                   "--workers", str(self.gateway_workers)]  # fmt: skip
        agents = {name: [py, "-m", "celery", "-A", "services.agent_worker.worker", "worker",
                         "-Q", f"{keys.AGENT_QUEUE},{keys.WEBHOOK_QUEUE}",
                         "--pool", self.agent_pool, "-c", str(self.agent_concurrency),
                         "-n", f"{node}@%h", *_CELERY_FLAGS]
                  for name, node in self.agent_worker_nodes().items()}  # fmt: skip
        tools = {name: [py, "-m", "celery", "-A", "services.tool_worker.worker", "worker",
                        "-Q", ",".join(self.tool_queues), "--pool", "threads",
                        "-c", str(self.tool_concurrency), "-n", f"{node}@%h", *_CELERY_FLAGS]
                 for name, node in self.tool_worker_nodes().items()}  # fmt: skip
        beat = [py, "-m", "celery", "-A", "services.agent_worker.worker", "beat",
                "-s", str(self.data_dir("beat") / "beat-schedule"), "-l", "INFO"]  # fmt: skip
        sentinels = self.sentinels.commands(self._loopback_redis) if self.sentinels else {}
        commands = {"redis": server, **sentinels, "model": model, "proxy": proxy,
                    "gateway": gateway, **agents, **engine, **tools, "beat": beat}  # fmt: skip
        if self.upstreams is not None:
            del commands["model"]  # a real upstream serves the model
        return commands

    def _loopback_redis(self, port: int, data_dir: Path) -> list[str]:
        return redis_server.argv(port, data_dir, appendfsync=self.redis_appendfsync)

    def tool_worker_nodes(self) -> dict[str, str]:
        """Each tool worker's process name and the name of its Celery node (before the @)."""
        return _numbered("tool_worker", "tools", self.tool_workers)

    def agent_worker_nodes(self) -> dict[str, str]:
        """Each agent worker's process name and the name of its Celery node (before the @)."""
        return _numbered("agent_worker", "agent", self.agent_workers)

    def _wait_ready(self, name: str) -> None:
        child = self.procs[name]
        after = child.log_start  # this run's part of a log kept across restarts
        if name in _BOUND:
            # Its own line first: any server on its port would answer the probe, and a
            # service that could not bind its port exits after it.
            child.wait_log(_BOUND[name], after=after)
        health = {
            "model": f"{self.model_url}/health",
            "proxy": f"{self.proxy_url}/healthz",
            "gateway": f"{self.gateway_url}/readyz",
        }
        if name in health:
            child.wait_http(health[name])
        elif name == "redis":
            self._wait_redis(child)
        elif self.sentinels and name in self.sentinels.names:
            self.sentinels.wait_ready(name, child)
        elif "_worker" in name:
            child.wait_log("ready.", after=after)
        elif name == "beat":
            child.wait_log("beat: Starting", after=after)

    def confined(self, name: str) -> bool:
        """Whether `name` starts through `devstack.confine`: a tool worker reaching the engine
        through the proxy, when this process may confine it (root with its capabilities; else
        the worker is this process's user, a developer's own)."""
        return name in self.engine_tokens and self._proxied and can_confine()

    def _spawn(self, name: str, argv: list[str]) -> None:
        self.argvs[name] = argv
        launched = confined_argv(argv) if self.confined(name) else argv
        hosted = self._host(name).argv(launched) if self.hosts else launched
        self.processes.start(name, hosted, env=self._env_of(name))

    def _env_of(self, name: str) -> dict[str, str]:
        """`env()` with what is `name`'s own: its metrics port and address."""
        metrics = dict(self._metrics_ports())
        env = {**self.env(), "TASKYARD_METRICS_HOST": self.address(name)}
        if name in metrics:
            env["TASKYARD_METRICS_PORT"] = str(metrics[name])
        elif name.startswith(("tool_worker_", "agent_worker_")):  # more: no port of their own
            env["TASKYARD_METRICS_PORT"] = "0"
        if not name.startswith(_HOLD_TOKEN_SECRET):
            env.pop(_TOKEN_SECRET, None)
        if name == "engine_proxy":
            runtime = env.get("TASKYARD_SANDBOX_RUNTIME", "runc")
            env = {"TASKYARD_ENGINE_PROXY_RUNTIMES": runtime, **env}
            env.update(self.engine_access.proxy_env())
        elif name in self.engine_tokens and self._proxied:
            env.update(self.engine_access.worker_env(name))
        return env

    def log_path(self, name: str) -> Path:
        return self.processes.log_path(name)

    def _wait_redis(self, child: Child) -> None:
        """Until Redis answers PING: after a restart, once it has loaded its AOF."""
        redis_server.wait_answering(child, self.ports.redis, self.address("redis"))

    def wait_log(self, name: str, marker: str, after: int = 0, timeout: float = 60) -> None:
        """Wait until the service logs `marker` after character `after` of its log."""
        self.procs[name].wait_log(marker, after, timeout)

    def kill(self, name: str) -> None:
        """SIGKILL one service, as a crash would (fault tests)."""
        self.processes.kill(name)

    def restart(self, name: str) -> None:
        """Start a killed service again with the same command line, and wait until it is up."""
        self._spawn(name, self.argvs[name])
        self._wait_ready(name)

    @property
    def worker_label(self) -> str:
        """The tool workers' sandbox label: this stack's own."""
        return f"stack-{self.run_dir.name}"

    def stop(self, drain: bool = False) -> None:
        """Stop every process: workers and beat first (warm shutdown, which may still call the
        model and Redis), then the HTTP services, each tier's processes together (their
        shutdowns overlap); Redis and its group last, newest first (in start order, also after
        restarts, which put a service at the end of `procs`). Then the sandboxes a killed tool
        worker left (a restarted worker removes them, but this stack's label is never used
        again).

        The agent workers are SIGKILLed unless `drain`: their warm shutdown takes 3 to 5 s
        (Celery's loop sees the signal only between broker polls), and the steps it would let
        finish matter nothing to a stack thrown away with its Redis, as every stack here is
        (its Redis lives in its run directory). `make up` drains, as a deployment would. The
        tool workers always stop gracefully: they end their sandboxes."""
        running = [name for name in reversed(self.argvs) if name in self.procs]
        redis_group = ["redis", *(self.sentinels.names if self.sentinels else [])]
        workers = [name for name in running if "_worker" in name or name == "beat"]
        services = [name for name in running if name not in {*workers, *redis_group}]
        if not drain:
            for name in self.agent_worker_nodes():
                if name in self.procs:
                    self.processes.kill(name)
            workers = [name for name in workers if name in self.procs]
        self.processes.stop_together(workers)
        self.processes.stop_together(services)
        for name in running:
            if name in redis_group:
                self.processes.stop(name)
        if self.sandbox_backend == "docker":
            remove_sandboxes(self.worker_label)


def remove_sandboxes(worker_label: str) -> None:
    """Remove every container under a tool worker's label; quietly without an engine."""
    try:
        client = docker.from_env()
        left = client.containers.list(all=True, filters={"label": f"{WORKER_LABEL}={worker_label}"})
        for container in left:
            with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
                container.remove(force=True)
        client.close()
    except docker.errors.DockerException:
        pass  # no engine here: nothing of ours runs on it


def _numbered(process: str, node: str, count: int) -> dict[str, str]:
    """Process names and Celery node names of `count` workers of one kind: the first plain,
    the others numbered from 2 (tool_worker: tools, tool_worker_2: tools2, ...)."""
    names = {process: node}
    names.update({f"{process}_{i}": f"{node}{i}" for i in range(2, count + 1)})
    return names
