"""Where a fork server's session writes its own pages: one session forked as `zygote.py` forks
it, its set-up replayed step by step as `_become_session` and `run_executor` run it, and its
Private_Dirty (/proc/<pid>/smaps_rollup: pages it no longer shares with the fork server) read
after each step, then after a cell `1` and the burst bench's first cell.

It runs in a container made as a fork server's (the image's kernel, its seccomp profile, no
capability), the probe being PID 1. The fork server is the kernel's own code (preload, warm-up,
freeze); only the steps' order is copied here. A kernel older than this bench lacks some of
its hooks: they are skipped, so the same command measures it.

    TASKYARD_SANDBOX_IMAGE=... .venv/bin/python bench/fork_pages_bench.py [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics

import docker

from taskyard.sandbox.docker.spec import ContainerSpec

# PID 1 of the container: forks a fork server, which forks one session; the session says each
# step on a socket that carries its pid (SCM_CREDENTIALS), and waits for the reading.
_PROBE = r"""
import gc, json, os, signal, socket, struct, sys, time
from kernel import display, executor, isolation, seccomp, wire, zygote
from kernel.isolation import SessionLimits

CREDS = struct.Struct("iII")
CELL = "import numpy, pandas; print(len(pandas.DataFrame(numpy.ones((3, 3)))))"

def session(sock, limits):
    def step(name):
        sock.sendmsg([name.encode()])
        sock.recv(1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    seccomp.set_dumpable(True)  # before: the fork server's pages are not ours to read
    step("forked; SIGCHLD, set_dumpable")
    isolation.enter_namespaces()
    step("enter_namespaces (the first child)")
    if os.fork() != 0:
        os._exit(0)
    time.sleep(0.2)
    step("the executor forked, the first child gone")
    isolation.wall_off(limits)
    step("wall_off")
    zygote._reseed()
    step("_reseed")
    seccomp.install_filter()
    step("install_filter")
    display.setup_matplotlib()
    step("setup_matplotlib")
    kernel = executor.Kernel()
    step("Kernel()")
    signal.signal(signal.SIGINT, kernel.on_sigint)
    os.register_at_fork(after_in_child=sock.close)
    executor._quiet_stdio()
    sock.sendall(getattr(executor, "_READY", None) or wire.encode_frame({"ready": True}))
    sock.recv(1)
    step("SIGINT, _quiet_stdio, ready sent")
    kernel.run("1")
    step("a cell: 1")
    kernel.run(CELL)
    step("the burst's first cell")
    step("end")
    time.sleep(60)

def fork_server(sock, limits):
    seccomp.set_dumpable(False)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    zygote.preload(["numpy", "pandas"])
    getattr(isolation, "prepare", lambda limits: None)(limits)
    zygote._warm_up()
    try:
        from kernel.pools import fill_pools
    except ImportError:
        fill_pools = lambda: None
    fill_pools()
    gc.freeze()
    if os.fork() == 0:
        session(sock, limits)
    time.sleep(60)

ours, theirs = socket.socketpair()
ours.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
if os.fork() == 0:
    ours.close()
    fork_server(theirs, SessionLimits(memory=256 << 20, pids=64, disk=64 << 20))
theirs.close()
steps = []
while True:
    data, ancillary, _, _ = ours.recvmsg(256, socket.CMSG_SPACE(CREDS.size))
    pid = CREDS.unpack(ancillary[0][2][:CREDS.size])[0]
    if b'"ready"' in data:  # the executor's ready frame, not a step
        ours.send(b"k")
        continue
    if data == b"end":
        break
    with open(f"/proc/{pid}/smaps_rollup") as rollup:
        dirty = next(int(l.split()[1]) for l in rollup if l.startswith("Private_Dirty:"))
    steps.append((data.decode(), dirty))
    ours.send(b"k")
print(json.dumps(steps))
"""


def run_once(client: docker.DockerClient, image: str) -> list[tuple[str, int]]:
    """One container, one session: each step's Private_Dirty (KiB), cumulated."""
    spec = ContainerSpec(image=image, sessions=64, command=("/usr/bin/python3", "-P", "-c", _PROBE))
    container = spec.create(client.api, labels={})
    try:
        # Attached before it starts: a sandbox container keeps no log.
        output = client.api.attach(container, stdout=True, stderr=False, stream=True)
        client.api.start(container)
        out = b"".join(output).decode()
    finally:
        client.api.remove_container(container, force=True)
    steps: list[tuple[str, int]] = json.loads(out.splitlines()[-1])
    return steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    image = os.environ.get("TASKYARD_SANDBOX_IMAGE", "taskyard/sandbox:latest")
    client = docker.from_env()
    runs = [run_once(client, image) for _ in range(args.runs)]
    print(f"{image}: a session's Private_Dirty after each step, median of {args.runs} runs (KiB)")
    print("| step | added | in all |\n| --- | ---: | ---: |")
    before = 0.0
    for n, (name, _) in enumerate(runs[0]):
        total = statistics.median(run[n][1] for run in runs)
        print(f"| {name} | {total - before:+.0f} | {total:.0f} |")
        before = total


if __name__ == "__main__":
    main()
