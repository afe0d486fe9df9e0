"""What the fork server's memory watch costs (kernel/memory.py): one container of 64 sessions
of one tenant, each idle or with a pool of worker processes; inside the container, the CPU
time of one sample (the counters only, and every session read in proportional set size) and
what a session holds in resident vs proportional memory.

`--mappings`: where each idle executor's own pages are (Private_Dirty of /proc/<pid>/smaps,
median per group of mappings), for the spares (never ran a cell) and for the sessions (after
their cell, `--cell`: `1` by default; the burst bench's is `import numpy, pandas;
print(len(pandas.DataFrame(numpy.ones((3, 3)))))`). Spares are told apart by age: the
sessions took the oldest.

    SANDBOX_IMAGE=... TASKYARD_SANDBOX_IMAGE=... .venv/bin/python bench/fork_memory_bench.py \
        [--sessions 64] [--workers 2] [--mappings] [--cell CODE]
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import docker

from taskyard.plumbing.settings import ToolWorkerSettings
from taskyard.sandbox.docker.provider import OWNER_LABEL, DockerSandboxProvider

# Run inside the container as the supervisor's uid: every session's processes, timed samples.
_PROBE = r"""
import json, os, statistics, time
from kernel.memory import MemoryWatch, proportional, resident
from kernel.processes import descendants

def inner(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("NSpid:"):
            return line.split()[1:]
executors = [int(p) for p in os.listdir("/proc") if p.isdigit() and (inner(p) or [0])[-1] == "1"
             and len(inner(p)) == 2]
trees = descendants(executors)
processes = sum(len(trees[e]) + 1 for e in executors)

def timed(share):
    costs = []
    for _ in range(20):
        watch = MemoryWatch(share)
        start = time.thread_time()
        watch.over({e: (e, 0) for e in executors})
        costs.append(time.thread_time() - start)
    return statistics.median(costs) * 1000, watch.interval_s

def started(pid):
    return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[19])

# Private_Dirty (kB) per group of mappings: a writable file mapping is its file's .data;
# anonymous ones are obmalloc's arenas, malloc's mmaps and the libraries' .bss together.
def groups(pid):
    found, name = {}, None
    for line in open(f"/proc/{pid}/smaps"):
        words = line.split()
        if "-" in words[0] and len(words) >= 5:
            path = words[5] if len(words) > 5 else ""
            name = (path if path.startswith("[") else
                    f"{path.rsplit('/', 1)[-1]} .data" if path and "w" in words[1] else
                    path.rsplit("/", 1)[-1] if path else "anonymous")
        elif words[0] == "Private_Dirty:":
            found[name] = found.get(name, 0) + int(words[1])
    return found

def breakdown(pids):
    maps = [groups(p) for p in pids]
    names = {n for m in maps for n in m}
    rows = {n: statistics.median(m.get(n, 0) for m in maps) for n in names}
    total = statistics.median(sum(m.values()) for m in maps)
    return {"executors": len(pids), "total_kib": total,
            **{n: v for n, v in sorted(rows.items(), key=lambda r: -r[1]) if v >= 8}}

children = open("/proc/1/task/1/children").read().split()
server = next(int(c) for c in children if len(inner(c)) == 1)  # the one not in a session
print(json.dumps({
    "sessions": len(executors), "processes": processes,
    "counters_ms_interval_s": timed(1 << 50), "proportional_ms_interval_s": timed(0),
    "executor_rss_mib": statistics.median(resident(e) for e in executors) / 2**20,
    "executor_pss_mib": statistics.median(proportional(e) for e in executors) / 2**20,
    "session_rss_mib": statistics.median(
        sum(resident(p) for p in [e, *trees[e]]) for e in executors) / 2**20,
    "session_pss_mib": statistics.median(
        sum(proportional(p) for p in [e, *trees[e]]) for e in executors) / 2**20,
    "fork_server_rss_mib": resident(server) / 2**20,
    **({"private_dirty_kib": {
        "sessions": breakdown(sorted(executors, key=started)[:SESSIONS]),
        "spares": breakdown(sorted(executors, key=started)[SESSIONS:]),
    }} if MAPPINGS else {}),
}))
"""

_POOL = "import multiprocessing\npool = multiprocessing.Pool({workers})\npool.map(abs, range(8))"


def _sessions_container(client: docker.DockerClient, owner: str) -> dict[str, Any]:
    """The container holding the sessions: the one of most processes (a host started ahead
    holds only its fork server and spares)."""
    listed = client.api.containers(filters={"label": f"{OWNER_LABEL}={owner}"})
    found: dict[str, Any] = max(
        listed, key=lambda c: len(client.api.top(c["Id"], ps_args="-o pid")["Processes"])
    )
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--workers", type=int, default=0, help="pool workers per session")
    parser.add_argument("--mappings", action="store_true", help="where executors' pages are")
    parser.add_argument("--cell", default="1", help="each session's cell (without --workers)")
    args = parser.parse_args()
    settings = ToolWorkerSettings(
        sandbox_warm_pool=0,
        sandbox_sessions_per_container=2 * args.sessions,  # one container: its next starts at 3/4
        sandbox_pids=64,
    )
    client = docker.from_env()
    provider = DockerSandboxProvider(settings, client=client, pool_size=0)
    try:
        for n in range(args.sessions):
            session = provider.get(f"bench:{n}")
            code = _POOL.format(workers=args.workers) if args.workers else args.cell
            assert session.run(code, 60).error is None
        found = _sessions_container(client, provider.owner)
        probe = f"SESSIONS, MAPPINGS = {args.sessions}, {args.mappings}\n{_PROBE}"
        ran = client.api.exec_create(found["Id"], ["python3", "-c", probe])
        out = client.api.exec_start(ran["Id"]).decode()
        print(json.dumps({"workers": args.workers, **json.loads(out.splitlines()[-1])}))
    finally:
        provider.close_all()


if __name__ == "__main__":
    main()
