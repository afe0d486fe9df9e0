"""`python -m services.engine_proxy`: its help, and a start refused with the reason."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TASKYARD_ENGINE_PROXY")}
    return subprocess.run(
        [sys.executable, "-m", "services.engine_proxy", *args],
        cwd=ROOT, env={**clean, **env}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_help_names_the_settings_and_the_flags() -> None:
    done = _run("--help")
    assert done.returncode == 0
    assert "TASKYARD_ENGINE_PROXY_CALLERS" in done.stdout and "--listen" in done.stdout


def test_a_proxy_no_worker_could_use_does_not_start(tmp_path: Path) -> None:
    listen = f"unix://{tmp_path}/proxy.sock"
    done = _run(TASKYARD_ENGINE_PROXY_LISTEN=listen)
    assert done.returncode != 0 and "names no worker" in done.stderr
    done = _run(TASKYARD_ENGINE_PROXY_LISTEN=listen, TASKYARD_ENGINE_PROXY_CALLERS="w=short")
    assert done.returncode != 0 and "shorter than 32" in done.stderr
    assert not (tmp_path / "proxy.sock").exists()
