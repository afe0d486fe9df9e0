"""Helpers for the proxy tests: scripted replicas as real processes, the SDK client."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable

import httpx
import openai
from prometheus_client.parser import text_string_to_metric_families

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
        command = [
            sys.executable,
            "-m",
            "services.scripted_model",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            *self._args,
        ]
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


def chat(
    client: openai.OpenAI, content: str = "hello", *, session: str | None = None, **kwargs: object
) -> tuple[str, str]:
    """One non-streamed chat call; returns (the answer text, the port of the replica)."""
    headers = {"X-Session-ID": session} if session else {}
    raw = client.chat.completions.with_raw_response.create(
        model=str(kwargs.pop("model", "scripted")),
        messages=kwargs.pop("messages", [{"role": "user", "content": content}]),  # type: ignore[arg-type]
        extra_headers=headers,
        **kwargs,  # type: ignore[arg-type]
    )
    reply = raw.parse()
    return reply.choices[0].message.content or "", raw.headers["x-scripted-replica"]


def metric(proxy: ProxyProcess, selector: str, absent: float | None = None) -> float:
    """The value of the first /metrics sample `selector` names: a sample name, optionally with
    some of its labels in any order (``name{kind="retry"}``); `absent` if none matches (a
    counter not yet incremented), else the test fails."""
    name, _, rest = selector.partition("{")
    wanted = dict(re.findall(r'(\w+)="([^"]*)"', rest))
    for family in text_string_to_metric_families(httpx.get(f"{proxy.url}/metrics").text):
        for sample in family.samples:
            if sample.name == name and wanted.items() <= sample.labels.items():
                return sample.value
    if absent is None:
        raise AssertionError(f"no metric sample matches {selector!r}")
    return absent


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    """Poll `condition` until true; fail the test if it never becomes true."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.02)
    raise AssertionError("the condition did not become true in time")
