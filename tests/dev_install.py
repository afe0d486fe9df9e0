"""The `taskyard` distribution's metadata as pyproject.toml declares it, for subprocesses.

`pip install -e .` writes the entry points into the installed metadata; a venv installed before
they changed lacks them. A child with `metadata_env(...)` finds this checkout's instead: its
PYTHONPATH holds a `taskyard` dist-info, which shadows the installed one. `taskyard_cli` runs
the CLI so.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from importlib.metadata import EntryPoint
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def metadata_env(where: Path, *, with_dev_commands: bool = True) -> dict[str, str]:
    """Our environment plus a PYTHONPATH holding the checkout's metadata (without the
    `taskyard.commands` entry points unless `with_dev_commands`: as in the production image
    with no devstack package, that is, as far as the CLI can tell)."""
    groups = {"console_scripts": PROJECT["scripts"], **PROJECT["entry-points"]}
    if not with_dev_commands:
        del groups["taskyard.commands"]
    info = where / f"{PROJECT['name']}-{PROJECT['version']}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {PROJECT['name']}\nVersion: {PROJECT['version']}\n"
    )
    (info / "entry_points.txt").write_text(
        "".join(
            f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in table.items())
            for group, table in groups.items()
        )
    )
    paths = [where, ROOT / "shared", ROOT]  # the checkout's taskyard, services and devstack
    return {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, paths))}


def taskyard_cli(
    where: Path, *args: str, with_dev_commands: bool = True, **env: str
) -> subprocess.CompletedProcess[str]:
    """`taskyard ARGS` with the checkout's metadata (see `metadata_env`) and `env` on top. It
    runs in `where`, not in the checkout: `python -m` puts the working directory first on
    sys.path, and the checkout's own `taskyard.egg-info` (which `pip install -e .` writes
    there) would shadow the stand-in."""
    child_env = {**metadata_env(where / "site", with_dev_commands=with_dev_commands), **env}
    return subprocess.run(
        [sys.executable, "-m", "taskyard.client.cli", *args], env=child_env, cwd=where,
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip


def declared(group: str) -> list[EntryPoint]:
    """The entry points of `group` as pyproject.toml declares them."""
    table = PROJECT["entry-points"][group]
    return [EntryPoint(name, value, group) for name, value in table.items()]
