"""What the host's kernel sees of one cell, under runc and under gVisor: strace on the
container's processes (runc) or on gVisor's Sentry (runsc) while the same cell runs (numpy,
a file written and read, a fork, a thread, a socket). Under runsc the cell's own calls are
answered by the Sentry and never reach the host; the host sees the Sentry's."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
import uuid

import docker

from taskyard.plumbing.settings import ToolWorkerSettings
from taskyard.sandbox import SandboxUnavailable
from taskyard.sandbox.docker.provider import OWNER_LABEL, DockerSandboxProvider

CELL = """
import numpy as np, os, socket, threading
a = np.random.default_rng(0).random((200, 200))
float((a @ a).sum())
open('/work/f', 'w').write('x' * 100_000)
open('/work/f').read()
pid = os.fork()
if pid == 0:
    os._exit(0)
os.waitpid(pid, 0)
t = threading.Thread(target=sum, args=([1],))
t.start()
t.join()
socket.socket().close()
"""
# A row of `strace -c`: % time, seconds, usecs/call, calls, [errors,] name.
_ROW = re.compile(r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+\d+\s+(?:\d+\s+)?(\w+)\s*$")


def syscall_section(quick: bool) -> None:
    """The distinct system calls the host's kernel got during the cell, per runtime."""
    print("\n## What the host kernel sees of one cell (strace; distinct system calls)")
    print("| runtime | system calls the host's kernel got |")
    print("| --- | --- |")
    if shutil.which("strace") is None:
        print("strace is not installed (apt-get install strace): no figures")
        return
    label = f"bench-{uuid.uuid4().hex[:8]}"
    for runtime in ("runc", "runsc"):
        try:
            names = _traced(runtime, label)
        except SandboxUnavailable as exc:
            print(f"| {runtime} | cannot run here: {exc} |")
            continue
        who = (
            "the cell's processes" if runtime == "runc" else "gVisor's Sentry (none from the cell)"
        )
        print(f"| {runtime} | {len(names)} from {who}: {' '.join(names)} |")


def _traced(runtime: str, label: str) -> list[str]:
    settings = ToolWorkerSettings(
        sandbox_runtime=runtime, sandbox_warm_pool=0, sandbox_worker_label=label
    )
    provider = DockerSandboxProvider(settings, pool_size=0)
    client = docker.from_env()
    out = f"/tmp/taskyard-strace-{label}-{runtime}.txt"
    try:
        sandbox = provider.get("bench:strace")
        sandbox.run("1", 60)
        (found,) = client.api.containers(filters={"label": f"{OWNER_LABEL}={provider.owner}"})
        pids = _host_pids(client, runtime, found["Id"])
        tracer = subprocess.Popen(
            ["strace", "-f", "-c", "-o", out, *(arg for pid in pids for arg in ("-p", pid))],
            stderr=subprocess.DEVNULL,
        )
        time.sleep(2)  # attached to every thread before the cell starts
        result = sandbox.run(CELL, 120)
        assert result.error is None, result.error
        tracer.terminate()
        tracer.wait()
        with open(out) as counted:
            rows = [_ROW.match(line) for line in counted]
        return sorted({row.group(1) for row in rows if row and row.group(1) != "total"})
    finally:
        provider.close_all()
        client.close()


def _host_pids(client: docker.DockerClient, runtime: str, container: str) -> list[str]:
    """runc: the supervisor and its children; runsc: the Sentry (`runsc-sandbox`)."""
    if runtime == "runc":
        pid = str(client.api.inspect_container(container)["State"]["Pid"])
        children = subprocess.run(["pgrep", "-P", pid], capture_output=True, text=True)
        return [pid, *children.stdout.split()]
    sentry = subprocess.run(
        ["pgrep", "-f", f"runsc-sandbox.*{container}"], capture_output=True, text=True
    )
    return sentry.stdout.split()
