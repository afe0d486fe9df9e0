"""Helpers for the proxy tests: scripted replicas and proxies as real processes, the SDK
client, and the plain stubs routing policies are tested on."""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import httpx
import openai
import redis
from prometheus_client.parser import text_string_to_metric_families

from devstack.llm import start_proxy, start_scripted_model
from devstack.procs import Processes, free_port
from services.llm_proxy.routing.ring import HashRing, hash_key

API_KEY = "test-key"
# Fast probes and short cooldowns, so health changes show within a test's time.
FAST_HEALTH = {
    "TASKYARD_LLM_API_KEY": API_KEY,
    "TASKYARD_PROXY_PROBE_INTERVAL_S": "0.2",
    "TASKYARD_PROXY_PROBE_TIMEOUT_S": "0.5",
    "TASKYARD_PROXY_COOLDOWN_S": "0.2",
    "TASKYARD_PROXY_REDIS_SYNC": "false",
}


class Replica:
    """A scripted model server process (the one fake the proxy tests allow)."""

    def __init__(self, procs: Processes, name: str, *args: str) -> None:
        self._procs, self._name, self._args = procs, name, args
        self.port = 0

    def start(self) -> Replica:
        """Start it: on a free port the first time, on the same port again after `kill`."""
        url = start_scripted_model(self._procs, self._name, *self._args, port=self.port)
        self.port = int(url.rsplit(":", 1)[1])
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def configure(self, **changes: object) -> None:
        """Change latency or faults at run time through `POST /scripted/config`."""
        response = httpx.post(f"http://127.0.0.1:{self.port}/scripted/config", json=changes)
        response.raise_for_status()

    def kill(self) -> None:
        """SIGKILL it, as a crash would."""
        if self._name in self._procs.children:
            self._procs.kill(self._name)


class ProxyProcess:
    """`python -m services.llm_proxy` on a free port, `env` adding TASKYARD_* settings."""

    def __init__(
        self, procs: Processes, name: str, upstreams: str | None = None, *,
        env: Mapping[str, str] | None = None, **flags: str,
    ) -> None:  # fmt: skip
        self._procs, self._name = procs, name
        self.url = start_proxy(procs, name, upstreams, env=env, **flags)

    @property
    def base_url(self) -> str:
        """The OpenAI base URL clients use (``.../v1``)."""
        return f"{self.url}/v1"

    def stop(self) -> None:
        """SIGTERM (it flushes usage to Redis on the way out), and wait for it."""
        if self._name in self._procs.children:
            self._procs.stop(self._name)


class RedisProcess:
    """A redis-server of one test's own (no persistence), which it may stop and start again on
    the same port."""

    def __init__(self, procs: Processes) -> None:
        binary = shutil.which("redis-server")
        assert binary, "redis-server missing: `make test` installs it"
        self._procs, self.port = procs, free_port()
        self._argv = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                      "--appendonly", "no"]  # fmt: skip
        self.start()

    def url(self, database: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        child = self._procs.start("redis", self._argv)
        client = redis.Redis.from_url(self.url())
        child.wait_until(lambda: _pings(client), "redis answering PING")
        client.close()

    def stop(self) -> None:
        self._procs.stop("redis")


def _pings(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False


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


@dataclass(eq=False)
class StubReplica:
    """What a routing policy reads of a replica, and nothing else."""

    name: str
    weight: float = 1.0
    in_flight: int = 0
    healthy: bool = True
    max_in_flight: int = 100
    latency_ms: float = 0.0

    @property
    def has_room(self) -> bool:
        return self.in_flight < self.max_in_flight


@dataclass
class StubGroup:
    replicas: list[StubReplica]
    name: str = "m"
    ring: HashRing = field(init=False)

    def __post_init__(self) -> None:
        self.ring = HashRing([r.name for r in self.replicas], [r.weight for r in self.replicas])


def stub_group(count: int, **kwargs: float) -> StubGroup:
    return StubGroup([StubReplica(f"r{i}", **kwargs) for i in range(count)])


def route_key(text: str) -> int:
    return hash_key(text.encode())


def metric_settles(proxy: ProxyProcess, selector: str, value: float, timeout: float = 5) -> float:
    """`metric` once it reads `value` (or what it reads after `timeout`): a stream's usage is
    counted as its relay ends, which may be just after the client has read the end."""
    deadline = time.monotonic() + timeout
    while (seen := metric(proxy, selector, absent=0.0)) != value and time.monotonic() < deadline:
        time.sleep(0.02)
    return seen
