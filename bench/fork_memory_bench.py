"""What the fork server's memory watch costs (kernel/memory.py): one container of 64 sessions
of one tenant, each idle or with a pool of worker processes; inside the container, the CPU
time of one sample (the counters only, and every session read in proportional set size) and
what a session holds in resident vs proportional memory.

    SANDBOX_IMAGE=... TASKYARD_SANDBOX_IMAGE=... .venv/bin/python bench/fork_memory_bench.py \
        [--sessions 64] [--workers 2]
"""

from __future__ import annotations

import argparse
import json

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
}))
"""

_POOL = "import multiprocessing\npool = multiprocessing.Pool({workers})\npool.map(abs, range(8))"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--workers", type=int, default=0, help="pool workers per session")
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
            code = _POOL.format(workers=args.workers) if args.workers else "1"
            assert session.run(code, 60).error is None
        (found,) = client.api.containers(filters={"label": f"{OWNER_LABEL}={provider.owner}"})
        ran = client.api.exec_create(found["Id"], ["python3", "-c", _PROBE])
        out = client.api.exec_start(ran["Id"]).decode()
        print(json.dumps({"workers": args.workers, **json.loads(out.splitlines()[-1])}))
    finally:
        provider.close_all()


if __name__ == "__main__":
    main()
