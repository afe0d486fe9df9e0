"""`devstack.confine`: which mounts it plans, and a command launched through it (as root): its
own /run, /tmp and HOME, the checkout readable and nothing written outside."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from devstack.confine import SCRATCH, confined_argv, needed_paths, plan
from devstack.procs import ROOT

_as_root = pytest.mark.skipif(os.geteuid() != 0, reason="the launcher needs root")


def test_the_engine_and_the_scratch_places_are_covered() -> None:
    layout = plan(needed_paths())
    assert "/run" in layout.covers and os.path.realpath("/var/run") == "/run"
    assert {path for path in SCRATCH if os.path.isdir(path)} <= set(layout.covers)
    assert str(ROOT) in layout.kept or any(ROOT.is_relative_to(path) for path in layout.kept)


def test_a_path_under_a_closed_directory_is_kept_under_a_cover(tmp_path: Path) -> None:
    closed = tmp_path / "closed"
    checkout = closed / "checkout"
    checkout.mkdir(parents=True)
    closed.chmod(0o700)
    layout = plan([str(checkout), str(checkout / ".venv"), "/usr"])
    assert set(layout.kept) == {"/usr", str(checkout)}  # the venv goes with the checkout
    covering = [cover for cover in layout.covers if checkout.is_relative_to(cover)]
    assert covering and layout.covers[covering[0]].startswith("mode=")


def test_a_directory_others_may_enter_is_not_covered() -> None:
    layout = plan(["/usr", "/etc"])
    assert not {"/usr", "/etc"} & set(layout.covers)


_PROBE = """
import json, os, pathlib
pathlib.Path("/tmp/written-inside").write_text("x")
print(json.dumps({"run": os.listdir("/run"), "home": os.environ["HOME"], "cwd": os.getcwd(),
                  "readme": pathlib.Path("README.md").exists(), "uid": os.getuid()}))
"""


@_as_root
def test_a_launched_command_sees_its_own_run_and_tmp() -> None:
    outside = Path("/tmp/written-inside")
    outside.unlink(missing_ok=True)
    argv = confined_argv([sys.executable, "-c", _PROBE])
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, timeout=60, check=True)
    seen = json.loads(done.stdout)
    assert seen["run"] == [] and seen["home"] == "/tmp" and seen["cwd"] == str(ROOT)
    assert seen["readme"] and seen["uid"] != 0
    assert not outside.exists()  # its /tmp was its own


@_as_root
def test_the_launcher_wants_a_command() -> None:
    done = subprocess.run(confined_argv([])[:-1], capture_output=True, timeout=60)
    assert done.returncode != 0 and b"usage" in done.stderr
