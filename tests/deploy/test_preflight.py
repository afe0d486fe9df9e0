"""`make up` and `make test` check what they need before installing anything, and each missing
piece stops them with one line that says what to do (scripts/preflight.sh)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts/preflight.sh"
# Run as root here: what a missing tool means for someone else is checked as nobody.
TOOLS = ("bash", "uname", "id", "df", "awk", "env")


@pytest.fixture
def workdir() -> Iterator[Path]:
    """A directory every user can enter, holding the script (tmp_path is 0700)."""
    where = Path(tempfile.mkdtemp(prefix="taskyard-preflight-"))
    where.chmod(0o755)
    shutil.copy(SCRIPT, where / "preflight.sh")
    yield where
    shutil.rmtree(where)


def _python(where: Path, name: str, setup: str) -> Path:
    """A python3 that runs `setup` before the code it is given (`python -c CODE`)."""
    path = where / name
    code = f"import sys; {setup}; exec(sys.argv[1])"
    path.write_text(f'#!/bin/sh\nexec {sys.executable} -c "{code}" "$2"\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def _run(where: Path, python: str, *, user: str | None = None, path: str | None = None):
    argv = ["bash", str(where / "preflight.sh"), python]
    if user:
        argv = [
            shutil.which("setpriv") or "setpriv",
            f"--reuid={user}",
            f"--regid={user}",
            "--clear-groups",
            *argv,
        ]
    env = {**os.environ, "PATH": path or os.environ["PATH"]}
    return subprocess.run(argv, cwd=where, env=env, capture_output=True, text=True, timeout=30)


def _one_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("taskyard: "), result.stderr
    return lines[0]


def test_this_machine_has_what_the_commands_need(workdir: Path) -> None:
    result = _run(workdir, sys.executable)
    assert (result.returncode, result.stderr) == (0, "")


def test_a_python_too_old_is_named_with_the_versions_that_work(workdir: Path) -> None:
    old = _python(workdir, "python3.10", "sys.version_info = (3, 10, 12, 'final', 0)")
    line = _one_line(_run(workdir, str(old)))
    assert "is 3.10.12" in line and "Python 3.11 or 3.12" in line and "PYTHON=" in line


def test_a_python_without_venv_says_which_package_to_install(workdir: Path) -> None:
    bare = _python(workdir, "python3", "sys.modules['ensurepip'] = None")
    assert "apt-get install python3-venv" in _one_line(_run(workdir, str(bare)))


def test_a_missing_python_is_named(workdir: Path) -> None:
    assert "python3.99 not found" in _one_line(_run(workdir, "python3.99"))


def test_without_root_a_missing_tool_is_named_with_the_way_out(workdir: Path) -> None:
    bin_dir = workdir / "bin"
    bin_dir.mkdir()
    for tool in TOOLS:
        (bin_dir / tool).symlink_to(shutil.which(tool) or tool)
    # A python3 that passes every check, runnable by nobody (this one may live under /root).
    python = workdir / "python3"
    python.write_text("#!/bin/sh\nexit 0\n")
    python.chmod(0o755)
    line = _one_line(_run(workdir, str(python), user="65534", path=str(bin_dir)))
    assert "not root" in line and "redis-server" in line and "sudo make" in line
