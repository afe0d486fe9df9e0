"""What a burst of new sessions left behind, read after the fact: each task's first cell as
the task's events and the tool worker's log timed it, when each sandbox container started, and
the memory of every process in those containers.

Times: Redis stamps each event's entry id with its clock (ms); the tool worker's JSON log
stamps each line (µs); both are this machine's wall clock.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import docker
import redis

from taskyard.plumbing import keys
from taskyard.sandbox.docker.provider import WORKER_LABEL

__all__ = [
    "CellTimes",
    "ContainerMemory",
    "cell_times",
    "container_memory",
    "container_starts",
    "pct",
]

_TOOL_CALL = "tool call IPythonInterpreter"


@dataclass
class CellTimes:
    """One task's first cell, in wall-clock seconds."""

    task_id: str
    dispatched: float  # the step that asked for it committed (status waiting_tools)
    picked: float | None  # a tool worker's thread took the job (its "tool call" log line)
    stored: float  # its result was stored (the tool result's event)
    ended: float  # the task's terminal event

    @property
    def worker_s(self) -> float | None:
        """The tool worker's view: job taken to result stored (the sandbox's acquire and the
        cell, the claim and the store's write)."""
        return None if self.picked is None else self.stored - self.picked

    @property
    def queued_s(self) -> float | None:
        return None if self.picked is None else self.picked - self.dispatched


def pct(values: list[float], q: float) -> float:
    """The q-quantile (nearest rank) of `values`; nan if there are none."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def _entry_s(entry_id: str) -> float:
    return int(entry_id.split("-")[0]) / 1e3


def _picked(tool_log: Path) -> dict[str, float]:
    """When the tool worker took each task's first code cell, by task id."""
    picked: dict[str, float] = {}
    for line in tool_log.read_text(errors="replace").splitlines():
        if _TOOL_CALL not in line or not line.startswith("{"):
            continue
        record = json.loads(line)
        if record.get("msg") == _TOOL_CALL and record.get("step") == 0:
            at = datetime.fromisoformat(record["ts"]).timestamp()
            picked.setdefault(record["task_id"], at)
    return picked


def cell_times(redis_url: str, task_ids: list[str], tool_log: Path) -> list[CellTimes]:
    """Each task's first cell: dispatched, picked up, stored, and the task's end."""
    picked = _picked(tool_log)
    client = redis.Redis.from_url(f"{redis_url}/0", decode_responses=True)
    found = []
    try:
        pipe = client.pipeline(transaction=False)
        for task_id in task_ids:
            pipe.xrange(keys.task_events(task_id))
        for task_id, entries in zip(task_ids, pipe.execute(), strict=True):
            times = _first_cell(entries)
            if times is not None:
                found.append(CellTimes(task_id, times[0], picked.get(task_id), *times[1:]))
    finally:
        client.close()
    return found


def _first_cell(entries: list[tuple[str, dict[str, str]]]) -> tuple[float, float, float] | None:
    dispatched = stored = None
    for entry_id, fields in entries:
        data = json.loads(fields.get("data") or "{}")
        if fields["kind"] == "status" and data.get("status") == "waiting_tools":
            dispatched = dispatched or _entry_s(entry_id)
        elif fields["kind"] == "message" and data.get("sender") == "IPythonInterpreter":
            stored = stored or _entry_s(entry_id)
    if dispatched is None or stored is None or not entries:
        return None
    return dispatched, stored, _entry_s(entries[-1][0])


def container_starts(worker_label: str) -> list[float]:
    """When each sandbox container of a tool worker's label started (wall clock, s), sorted."""
    client = docker.from_env()
    try:
        found = client.api.containers(all=True, filters={"label": f"{WORKER_LABEL}={worker_label}"})
        starts = []
        for listed in found:
            state = client.api.inspect_container(listed["Id"])["State"]
            starts.append(datetime.fromisoformat(state["StartedAt"][:26] + "+00:00").timestamp())
        return sorted(starts)
    finally:
        client.close()


@dataclass
class ContainerMemory:
    """The processes of one sandbox container: sessions' executors apart from the rest."""

    executors: list[dict[str, int]]  # each session's executor: smaps_rollup fields, bytes
    others: list[dict[str, int]]  # the supervisor, the fork server, ...

    def total(self, field: str) -> int:
        return sum(p[field] for p in self.executors + self.others)


def _rollup(pid: int) -> dict[str, int] | None:
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return None
    fields = {}
    for line in text.splitlines()[1:]:
        name, value, *_ = line.split()
        fields[name.rstrip(":")] = int(value) * 1024
    fields["Uss"] = fields.get("Private_Clean", 0) + fields.get("Private_Dirty", 0)
    return fields


def _depth(pid: int) -> int:
    """How many pid namespaces `pid` is seen in (NSpid's entries): 3 for a forked session's
    executor (host, container, its own), 2 for the container's own processes."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    for line in status.splitlines():
        if line.startswith("NSpid:"):
            return len(line.split()) - 1
    return 0


def container_memory(worker_label: str) -> list[ContainerMemory]:
    """Every running sandbox container of a tool worker's label: its processes' memory, read
    on the host (runc: a container's processes are the host's). Needs root. Executors: a fork
    server's sessions (spares included), each in a pid namespace of its own; in a container of
    one session, every process but its init (the supervisor)."""
    client = docker.from_env()
    found = []
    try:
        listed = client.api.containers(filters={"label": f"{WORKER_LABEL}={worker_label}"})
        for container in listed:
            init = client.api.inspect_container(container["Id"])["State"]["Pid"]
            top = client.api.top(container["Id"], ps_args="-o pid")
            depths = {int(row[0]): _depth(int(row[0])) for row in top["Processes"]}
            forked = any(d >= 3 for d in depths.values())
            memory = ContainerMemory([], [])
            for pid, depth in depths.items():
                rollup = _rollup(pid)
                if rollup is None:
                    continue
                executor = depth >= 3 if forked else pid != init
                (memory.executors if executor else memory.others).append(rollup)
            found.append(memory)
    finally:
        client.close()
    return found


def median_mib(values: list[int]) -> float:
    return statistics.median(values) / 2**20 if values else float("nan")


def engine_pids() -> list[int]:
    """The Docker engine's long-lived processes on this machine: dockerd, containerd (each
    container's shim and runc end with it: their CPU is not counted)."""
    names = {"dockerd", "containerd"}
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() in names:
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def containers_cpu_s(worker_label: str) -> dict[str, float]:
    """CPU seconds each running sandbox container of a tool worker's label used so far (its
    cgroup v1 cpuacct), by container id."""
    client = docker.from_env()
    try:
        listed = client.api.containers(filters={"label": f"{WORKER_LABEL}={worker_label}"})
    finally:
        client.close()
    used = {}
    for container in listed:
        path = Path(f"/sys/fs/cgroup/cpuacct/docker/{container['Id']}/cpuacct.usage")
        try:
            used[container["Id"]] = int(path.read_text()) / 1e9
        except OSError:
            continue
    return used
