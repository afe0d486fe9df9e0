"""The replica pool at run time: each replica's live state, grouped by the model it serves."""

from __future__ import annotations

from dataclasses import dataclass, field

from services.llm_proxy.replicas.spec import ANY_MODEL, PoolSpec, ReplicaSpec
from services.llm_proxy.replicas.upstream import UpstreamPool
from services.llm_proxy.routing.ring import HashRing
from services.llm_proxy.settings import ProxySettings

__all__ = ["Group", "Pool", "Replica"]

# Weight of the newest sample in the latency moving average.
_EWMA_ALPHA = 0.2


@dataclass(eq=False, slots=True)
class Replica:
    """One replica: its configuration, connections and what the proxy knows of its state."""

    name: str
    spec: ReplicaSpec
    conns: UpstreamPool
    request_prefix: bytes  # headers every upstream request carries (host, auth, type)
    in_flight: int = 0
    # Requests in flight integrated over (loop) time up to `busy_at`: its change over a sync
    # interval gives the mean in flight, the load other proxy instances count (a sample of
    # `in_flight` would often show a request that is over a moment later).
    busy_s: float = 0.0
    busy_at: float = 0.0
    healthy: bool = True
    failures: int = 0  # consecutive failed exchanges
    ejections: int = 0  # consecutive ejections, which grow the cooldown
    cooldown_until: float = 0.0
    latency_ms: float = 0.0  # moving average of time to the response head (0: unknown)
    last_sample: float = 0.0  # loop time of the newest latency sample
    served_models: set[str] = field(default_factory=set)

    @property
    def weight(self) -> float:
        return self.spec.weight

    @property
    def max_in_flight(self) -> int:
        return self.spec.max_in_flight

    @property
    def shared_id(self) -> str:
        """The name every proxy instance configured with this replica gives it (its model
        and URL), under which instances share placements and load."""
        return f"{self.spec.model}={self.spec.url.rstrip('/')}"

    @property
    def has_room(self) -> bool:
        return self.in_flight < self.spec.max_in_flight

    def begin(self, now: float) -> None:
        """A request to this replica starts (`now`: loop time)."""
        self.busy_s = self.busy(now)
        self.busy_at = now
        self.in_flight += 1

    def end(self, now: float) -> None:
        """A request to this replica is over."""
        self.busy_s = self.busy(now)
        self.busy_at = now
        self.in_flight -= 1

    def busy(self, now: float) -> float:
        """Requests in flight integrated over time, up to `now`."""
        return self.busy_s + self.in_flight * (now - self.busy_at)

    def observe_latency(self, ms: float, now: float) -> None:
        self.last_sample = now
        self.latency_ms = (
            ms
            if self.latency_ms == 0.0
            else (self.latency_ms + _EWMA_ALPHA * (ms - self.latency_ms))
        )


def _request_prefix(spec: ReplicaSpec) -> bytes:
    host = f"{spec.host}:{spec.port}".encode()  # not a Redis key: the Host header
    lines = [b"host: " + host, b"content-type: application/json"]
    if spec.api_key:
        lines.append(b"authorization: Bearer " + spec.api_key.encode())
    return b"\r\n".join(lines) + b"\r\n"


class Group:
    """The replicas of one model, with the hash ring their affinity routing walks."""

    def __init__(self, name: str, replicas: list[Replica]) -> None:
        self.name = name
        self.replicas = replicas
        self.ring = HashRing([r.name for r in replicas], [r.weight for r in replicas])


class Pool:
    """Replicas by model name; replicas configured without a model serve any name."""

    def __init__(self, spec: PoolSpec, settings: ProxySettings) -> None:
        self.replicas = [self._make(i, r, settings) for i, r in enumerate(spec.replicas)]
        self.fallbacks = spec.fallbacks
        members: dict[str, list[Replica]] = {}
        for replica in self.replicas:
            members.setdefault(replica.spec.model, []).append(replica)
        self._groups = {name: Group(name, replicas) for name, replicas in members.items()}

    @staticmethod
    def _make(index: int, spec: ReplicaSpec, settings: ProxySettings) -> Replica:
        conns = UpstreamPool(
            spec.host,
            spec.port,
            settings.proxy_connect_timeout_s,
            settings.proxy_read_timeout_s,
            max_idle=spec.max_in_flight,
            tls=spec.tls,
        )
        return Replica(f"r{index}-{spec.host}:{spec.port}", spec, conns, _request_prefix(spec))

    def group(self, model: str) -> Group | None:
        """The group that serves `model`, or None if none does."""
        return self._groups.get(model) or self._groups.get(ANY_MODEL)

    def model_names(self) -> list[str]:
        """Every model name the pool is known to serve: configured and discovered."""
        names = {name for name in self._groups if name != ANY_MODEL}
        wildcard = self._groups.get(ANY_MODEL)
        for replica in wildcard.replicas if wildcard else []:
            names |= replica.served_models
        return sorted(names)

    def context_lengths(self) -> dict[str, int]:
        """Each configured model's context window: the smallest its replicas declare."""
        lengths: dict[str, int] = {}
        for replica in self.replicas:
            declared, model = replica.spec.context_length, replica.spec.model
            if declared and model != ANY_MODEL:
                lengths[model] = min(lengths.get(model, declared), declared)
        return lengths

    def close(self) -> None:
        """Close every idle upstream connection."""
        for replica in self.replicas:
            replica.conns.close()
