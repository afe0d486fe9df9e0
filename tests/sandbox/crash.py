"""A tool worker that dies with its sandboxes alive: a child process that starts a provider
under a worker label of the test's own, leaves one cell running forever, and exits with
`os._exit(9)` (no clean-up runs, as after SIGKILL)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

__all__ = ["crash_a_worker"]

ROOT = Path(__file__).resolve().parents[2]


def crash_a_worker(provider: str, label: str, then: str = "", sessions: int = 1) -> None:
    """`provider`: "local" or "docker"; `then`: lines run (with the provider as `p`) after
    the busy cell started and before the crash; `sessions`: the docker backend's sessions per
    container (1: a container each; more: a fork server holds the tenant's)."""
    module, name = {
        "local": ("taskyard.sandbox.local.provider", "LocalSandboxProvider"),
        "docker": ("taskyard.sandbox.docker.provider", "DockerSandboxProvider"),
    }[provider]
    script = (
        "import os, threading, time\n"
        "from taskyard.plumbing.settings import ToolWorkerSettings\n"
        f"from {module} import {name}\n"
        f"p = {name}(ToolWorkerSettings(), pool_size=0)\n"
        "busy = threading.Thread(target=p.get('t:busy').run, args=('while True: pass', 60))\n"
        "busy.start()\n"
        f"{then}"
        "time.sleep(1)\n"
        "os._exit(9)\n"
    )
    env = {**os.environ, "TASKYARD_SANDBOX_WORKER_LABEL": label,
           "TASKYARD_SANDBOX_SESSIONS_PER_CONTAINER": str(sessions)}  # fmt: skip
    worker = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, env=env
    )
    assert worker.returncode == 9, worker.stderr
