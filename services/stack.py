"""The local stack: Redis and every service as processes on this machine.

Used by `make up` (through `taskyard up`) and by the end-to-end tests. The model is the scripted
OpenAI-compatible upstream unless `upstreams` points at a real one (vLLM, ...).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import redis

from shared import keys
from shared.settings import parse_api_keys

__all__ = ["LocalStack", "StackPorts", "free_port"]

_REPO = Path(__file__).resolve().parent.parent  # services run from here, so plugins import

_CELERY_FLAGS = ["--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "INFO"]
# The tenant tokens' secret goes to these services only: never to a tool worker, whose
# sandboxes run the models' code, nor to the gateway, which has no use for it.
_TOKEN_SECRET = "TASKYARD_LLM_TOKEN_SECRET"
_HOLD_TOKEN_SECRET = frozenset({"proxy", "agent_worker", "beat"})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class StackPorts:
    redis: int = field(default_factory=free_port)
    model: int = field(default_factory=free_port)
    proxy: int = field(default_factory=free_port)
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
    # write survives a SIGKILL of Redis; see the README's Deployment section).
    redis_appendfsync: str = "everysec"
    sandbox_backend: str = "docker"
    upstreams: str | None = None  # real OpenAI-compatible upstreams; scripted model if None
    model_tokens_per_s: float = 0  # the scripted model's stream pace (0: as fast as it can)
    gateway_workers: int = 1
    agent_pool: str = "gevent"  # "threads" is the old configuration, kept for the benchmarks
    agent_concurrency: int = 1000
    tool_concurrency: int = 4
    tool_queues: tuple[str, ...] = ("tools.IPythonInterpreter", "tools.WebBrowser")
    extra_env: dict[str, str] = field(default_factory=dict)  # more TASKYARD_* settings
    # Signs the agent workers' model calls for their tenants (a fresh one per stack).
    token_secret: str = field(default_factory=lambda: secrets.token_hex(32))
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    argvs: dict[str, list[str]] = field(default_factory=dict)

    @property
    def api_key(self) -> str:
        """The first key of `api_keys`: the one the demo task and the tests use."""
        return next(iter(parse_api_keys(self.api_keys)))

    @property
    def gateway_url(self) -> str:
        return f"http://127.0.0.1:{self.ports.gateway}"

    @property
    def redis_url(self) -> str:
        return f"redis://127.0.0.1:{self.ports.redis}"

    @property
    def metrics_urls(self) -> dict[str, str]:
        """Where each service serves its Prometheus metrics."""
        own = {name: f"http://127.0.0.1:{port}/metrics" for name, port in self._metrics_ports()}
        return {
            "gateway": f"{self.gateway_url}/metrics",
            "proxy": f"http://127.0.0.1:{self.ports.proxy}/metrics",
            **own,
        }

    def _metrics_ports(self) -> list[tuple[str, int]]:
        ports = self.ports
        return [("agent_worker", ports.agent_metrics), ("tool_worker", ports.tool_metrics),
                ("beat", ports.beat_metrics)]  # fmt: skip

    def env(self) -> dict[str, str]:
        upstreams = self.upstreams or f"http://127.0.0.1:{self.ports.model}/v1"
        return {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "TASKYARD_REDIS_URL": f"{self.redis_url}/0",
            "TASKYARD_BROKER_URL": f"{self.redis_url}/1",
            "TASKYARD_RESULT_BACKEND": f"{self.redis_url}/2",
            "TASKYARD_API_KEYS": self.api_keys,
            "TASKYARD_LLM_BASE_URL": f"http://127.0.0.1:{self.ports.proxy}/v1",
            "TASKYARD_PROXY_UPSTREAMS": upstreams,
            "TASKYARD_SANDBOX_BACKEND": self.sandbox_backend,
            # The stack's own: a (re)started tool worker removes every sandbox of its label.
            "TASKYARD_SANDBOX_WORKER_LABEL": f"stack-{self.run_dir.name}",
            # Everything here is on loopback, webhook receivers too.
            "TASKYARD_WEBHOOK_ALLOW_PRIVATE": "true",
            # Written by the tool worker, served by the gateway: one directory on this machine.
            "TASKYARD_ARTIFACTS_DIR": str(self.run_dir / "artifacts"),
            _TOKEN_SECRET: self.token_secret,
            **self.extra_env,
        }

    def start(self) -> LocalStack:
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
        for name in self.procs:
            self._wait_ready(name)

    def commands(self) -> dict[str, list[str]]:
        """Each service's command line, in start order (Redis first)."""
        py, host = sys.executable, "127.0.0.1"
        server = [_redis_server(), "--port", str(self.ports.redis), "--bind", host,
                 "--appendonly", "yes", "--appendfsync", self.redis_appendfsync,
                 "--dir", str(self.run_dir),
                 "--save", ""]  # fmt: skip
        model = [py, "-m", "services.scripted_model", "--host", host, "--port",
                 str(self.ports.model), "--tokens-per-s", str(self.model_tokens_per_s)]  # fmt: skip
        proxy = [py, "-m", "services.llm_proxy", "--host", host, "--port", str(self.ports.proxy)]
        gateway = [py, "-m", "uvicorn", "services.gateway.app:app", "--host", host,
                   "--port", str(self.ports.gateway), "--no-access-log",
                   "--workers", str(self.gateway_workers)]  # fmt: skip
        agent = [py, "-m", "celery", "-A", "services.agent_worker.worker", "worker",
                 "-Q", f"{keys.AGENT_QUEUE},{keys.WEBHOOK_QUEUE}", "--pool", self.agent_pool,
                 "-c", str(self.agent_concurrency), "-n", "agent@%h", *_CELERY_FLAGS]  # fmt: skip
        tools = [py, "-m", "celery", "-A", "services.tool_worker.worker", "worker",
                 "-Q", ",".join(self.tool_queues), "--pool", "threads",
                 "-c", str(self.tool_concurrency), "-n", "tools@%h", *_CELERY_FLAGS]  # fmt: skip
        beat = [py, "-m", "celery", "-A", "services.agent_worker.worker", "beat",
                "-s", str(self.run_dir / "beat-schedule"), "-l", "INFO"]  # fmt: skip
        commands = {"redis": server, "model": model, "proxy": proxy, "gateway": gateway,
                    "agent_worker": agent, "tool_worker": tools, "beat": beat}  # fmt: skip
        if self.upstreams is not None:
            del commands["model"]  # a real upstream serves the model
        return commands

    def _wait_ready(self, name: str, log_offset: int = 0) -> None:
        health = {
            "model": f"http://127.0.0.1:{self.ports.model}/health",
            "proxy": f"http://127.0.0.1:{self.ports.proxy}/healthz",
            "gateway": f"{self.gateway_url}/readyz",
        }
        if name in health:
            self._wait_http(name, health[name])
        elif name == "redis":
            self._wait_redis()
        elif name.endswith("_worker"):
            self.wait_log(name, "ready.", after=log_offset)
        elif name == "beat":
            self.wait_log(name, "beat: Starting", after=log_offset)

    def _spawn(self, name: str, argv: list[str]) -> None:
        self.argvs[name] = argv
        log = open(self.log_path(name), "ab")  # noqa: SIM115 - the process owns it until stop()
        metrics = dict(self._metrics_ports())
        env = self.env()
        if name in metrics:
            env["TASKYARD_METRICS_PORT"] = str(metrics[name])
        if name not in _HOLD_TOKEN_SECRET:
            env.pop(_TOKEN_SECRET, None)
        self.procs[name] = subprocess.Popen(
            argv,
            env=env,
            cwd=_REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def log_path(self, name: str) -> Path:
        return self.run_dir / f"{name}.log"

    def _check_alive(self, name: str) -> None:
        proc = self.procs[name]
        if proc.poll() is not None:
            tail = self.log_path(name).read_text(errors="replace")[-3000:]
            raise RuntimeError(f"{name} exited with {proc.returncode}:\n{tail}")

    def _wait_http(self, name: str, url: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._check_alive(name)
            try:
                if httpx.get(url, timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise TimeoutError(f"{name} not ready at {url} after {timeout}s")

    def _wait_redis(self, timeout: float = 60) -> None:
        """Until Redis answers PING: after a restart, once it has loaded its AOF."""
        client = redis.Redis.from_url(self.redis_url, socket_timeout=2)
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                self._check_alive("redis")
                try:
                    if client.ping():
                        return
                except (redis.ConnectionError, redis.TimeoutError):
                    pass  # not listening yet, or still loading (BusyLoadingError)
                time.sleep(0.05)
        finally:
            client.close()
        raise TimeoutError(f"redis not answering on {self.redis_url} after {timeout}s")

    def wait_log(self, name: str, marker: str, after: int = 0, timeout: float = 60) -> None:
        """Wait until the service logs `marker` after character `after` of its log."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._check_alive(name)
            if marker in self.log_path(name).read_text(errors="replace")[after:]:
                return
            time.sleep(0.1)
        raise TimeoutError(f"{name} did not log {marker!r} within {timeout}s")

    def kill(self, name: str) -> None:
        """SIGKILL one service, as a crash would (fault tests)."""
        proc = self.procs.pop(name)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    def restart(self, name: str) -> None:
        """Start a killed service again with the same command line, and wait until it is up."""
        log_offset = len(self.log_path(name).read_text(errors="replace"))
        self._spawn(name, self.argvs[name])
        self._wait_ready(name, log_offset)

    def stop(self) -> None:
        """Stop every process: workers first (warm shutdown), Redis last (also after restarts,
        which put a service at the end of `procs`)."""
        for name in reversed([name for name in self.argvs if name in self.procs]):
            proc = self.procs.pop(name)
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def _redis_server() -> str:
    path = shutil.which("redis-server")
    if path is None:
        raise RuntimeError("redis-server not found: run `make deps` (apt-get install redis-server)")
    return path
