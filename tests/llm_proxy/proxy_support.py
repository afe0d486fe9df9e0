"""Helpers for the proxy tests: scripted replicas as real processes, the SDK client."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Callable

import httpx
import openai

from services.llm_proxy.testing import ProxyProcess

API_KEY = "test-key"
# Fast probes and short cooldowns, so health changes show within a test's time.
FAST_HEALTH = {
    "TASKYARD_LLM_API_KEY": API_KEY,
    "TASKYARD_PROXY_PROBE_INTERVAL_S": "0.2",
    "TASKYARD_PROXY_PROBE_TIMEOUT_S": "0.5",
    "TASKYARD_PROXY_COOLDOWN_S": "0.2",
    "TASKYARD_PROXY_REDIS_SYNC": "false",
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Replica:
    """A scripted model server process (the one fake the proxy tests allow)."""

    def __init__(self, *args: str, port: int = 0) -> None:
        self._args = args
        self.port = port
        self.process: subprocess.Popen[str] | None = None

    def start(self) -> Replica:
        command = [sys.executable, "-m", "services.scripted_model", "--host", "127.0.0.1",
                   "--port", str(self.port), *self._args]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line.startswith("listening on"), line
        self.port = int(line.rsplit(":", 1)[1])
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def configure(self, **changes: object) -> None:
        """Change latency or faults at run time through `POST /scripted/config`."""
        response = httpx.post(f"http://127.0.0.1:{self.port}/scripted/config", json=changes)
        response.raise_for_status()

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            if self.process.stdout is not None:
                self.process.stdout.close()
            self.process = None


ReplicaFactory = Callable[..., list[Replica]]
ProxyFactory = Callable[..., ProxyProcess]


def upstreams_of(group: list[Replica]) -> str:
    return ",".join(r.url for r in group)


def client_for(proxy: ProxyProcess, **kwargs: object) -> openai.OpenAI:
    """The official SDK against the proxy; no SDK retries, so the proxy's are what we see."""
    return openai.OpenAI(base_url=proxy.base_url, api_key=API_KEY, max_retries=0, **kwargs)
