"""`GET /v1/system`'s body: the queues, the workers, the model replicas."""

from __future__ import annotations

from pydantic import BaseModel

__all__ = ["QueueDepth", "ReplicaState", "SystemView"]


class QueueDepth(BaseModel):
    name: str
    depth: int


class ReplicaState(BaseModel):
    name: str
    model: str
    healthy: bool
    in_flight: int
    latency_ms: float


class SystemView(BaseModel):
    """What runs the tasks: the queues' depths, the workers that answered a ping just now,
    and the LLM proxy's replicas (empty while the proxy does not answer)."""

    queues: list[QueueDepth]
    workers: list[str]
    replicas: list[ReplicaState]
