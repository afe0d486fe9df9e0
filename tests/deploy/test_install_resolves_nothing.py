"""Every install from a lock resolves nothing against the index: the project's own install lines
(the Makefile's `install-lock` recipe, the image's `pip install -r requirements.lock` line, read
from the files) run against a local file index that has published a newer release of a locked
package, and still install the pinned one.

The planted defect is the one that broke every fresh machine on 2026-12-06: a locked package
requires another with an extra (`b[x]>=1`, as jusText requires `lxml[html_clean]>=4.4.2`), the
index has a newer `b` than the lock's, and pip resolving that extra reaches outside the pins, so
`--require-hashes` refuses the whole install. Each line is also run with its `--no-deps` taken
out, to prove this test sees the defect."""

from __future__ import annotations

import base64
import hashlib
import os
import re
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.deploy.test_install import ROOT, _pip_installs

PINNED_REFUSAL = "all requirements must have their versions pinned with =="


@dataclass(frozen=True)
class Dist:
    """One wheel of the test index: its name, version, and metadata lines beyond the name."""

    name: str
    version: str
    metadata: tuple[str, ...] = ()


# `a` needs `b` with its extra `x`; `b` 2.0 was published after the lock pinned 1.0.
INDEX = (
    Dist("a", "1", ("Requires-Dist: b[x]>=1",)),
    Dist("b", "1.0", ("Provides-Extra: x", 'Requires-Dist: c; extra == "x"')),
    Dist("b", "2.0", ("Provides-Extra: x", 'Requires-Dist: c; extra == "x"')),
    Dist("c", "1.0"),
)
LOCKED = {"a": "1", "b": "1.0", "c": "1.0"}


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _wheel(where: Path, dist: Dist) -> Path:
    """A pure-Python wheel of `dist` holding one empty module named after it."""
    info = f"{dist.name}-{dist.version}.dist-info"
    files = {
        f"{dist.name}/__init__.py": b"",
        f"{info}/METADATA": "\n".join(
            (
                "Metadata-Version: 2.1",
                f"Name: {dist.name}",
                f"Version: {dist.version}",
                *dist.metadata,
            )
        ).encode()
        + b"\n",
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: taskyard-test\n"
        b"Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [_record_line(name, data) for name, data in files.items()] + [f"{info}/RECORD,,"]
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    path = where / f"{dist.name}-{dist.version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return path


@dataclass(frozen=True)
class Index:
    """A local file index, the lock that pins it, and the environment that points pip at it."""

    wheels: Path
    lock: Path
    env: dict[str, str]


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Index:
    where = tmp_path_factory.mktemp("index")
    wheels = where / "wheels"
    wheels.mkdir()
    lines = []
    for dist in INDEX:
        path = _wheel(wheels, dist)
        if LOCKED[dist.name] == dist.version:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            lines.append(f"{dist.name}=={dist.version} --hash=sha256:{digest}")
    lock = where / "test.lock"
    lock.write_text("\n".join(lines) + "\n")
    # No network, no configuration of this machine's (a pip.conf or a constraint): only the
    # folder of wheels above.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env |= {
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(wheels),
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    return Index(wheels, lock, env)


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(tmp_path / "venv")], check=True)
    return tmp_path / "venv"


def _installed(venv: Path) -> dict[str, str]:
    listing = subprocess.run(
        [str(venv / "bin/python"), "-c", _LIST], capture_output=True, text=True, check=True
    )
    return dict(line.split("=", 1) for line in listing.stdout.split())


_LIST = (
    "from importlib import metadata\n"
    "for d in metadata.distributions():\n"
    "    print(f\"{d.metadata['Name']}={d.version}\")"
)


def _make_install_lock(index: Index, venv: Path, *, dry_run: bool = False) -> list[str]:
    command = ["make", "--no-print-directory", "-C", str(ROOT)]
    command += ["-n"] if dry_run else []
    command += ["install-lock", f"VENV={venv}", f"LOCK={index.lock}"]
    done = subprocess.run(command, env=index.env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.splitlines()


def _run(line: list[str], index: Index) -> subprocess.CompletedProcess[str]:
    return subprocess.run(line, env=index.env, capture_output=True, text=True)


def _without_no_deps(line: list[str]) -> list[str]:
    assert "--no-deps" in line, line
    return [word for word in line if word != "--no-deps"]


def test_the_makefile_installs_the_pinned_version_when_the_index_has_a_newer_one(
    index: Index, venv: Path
) -> None:
    _make_install_lock(index, venv)
    installed = _installed(venv)
    assert {name: installed.get(name) for name in LOCKED} == LOCKED


def test_the_makefile_recipe_without_no_deps_fails_as_fresh_machines_did(
    index: Index, venv: Path
) -> None:
    recipe = _make_install_lock(index, venv, dry_run=True)
    installs = [line.split() for line in recipe if " install " in line]
    assert len(installs) == 1 and installs[0][0] == f"{venv}/bin/pip", recipe
    done = _run(_without_no_deps(installs[0]), index)
    assert done.returncode != 0
    assert PINNED_REFUSAL in done.stderr
    assert "b[x]>=1" in done.stderr


def _image_lock_install(venv: Path, lock: Path) -> list[str]:
    """The Dockerfile's `pip install ... -r requirements.lock`, as written there, run by the
    test venv's pip on the test lock."""
    lines = [args for args in _pip_installs((ROOT / "Dockerfile").read_text()) if "-r" in args]
    assert len(lines) == 1, lines
    args = [str(lock) if word == "requirements.lock" else word for word in lines[0]]
    return [str(venv / "bin/pip"), "install", *args]


def test_the_image_installs_the_pinned_version_when_the_index_has_a_newer_one(
    index: Index, venv: Path
) -> None:
    done = _run(_image_lock_install(venv, index.lock), index)
    assert done.returncode == 0, done.stderr
    installed = _installed(venv)
    assert {name: installed.get(name) for name in LOCKED} == LOCKED
    check = _run([str(venv / "bin/pip"), "check"], index)
    assert check.returncode == 0, check.stdout


def test_the_image_line_without_no_deps_fails_as_fresh_machines_did(
    index: Index, venv: Path
) -> None:
    done = _run(_without_no_deps(_image_lock_install(venv, index.lock)), index)
    assert done.returncode != 0
    assert PINNED_REFUSAL in done.stderr


def test_every_lock_install_in_the_repository_takes_no_deps() -> None:
    """The class, not the one line: any `pip install -r <lock>` the repository's build files
    run (Makefile, Dockerfiles, scripts) says --no-deps."""
    sources = [ROOT / "Makefile", *ROOT.glob("**/Dockerfile"), *ROOT.glob("scripts/*.sh")]
    found = 0
    for source in sources:
        if ".venv" in source.parts:
            continue
        joined = re.sub(r"\\\n", " ", source.read_text())
        pip_lines = "\n".join(line for line in joined.splitlines() if "pip install" in line)
        for args in _pip_installs(pip_lines):
            if any(word.endswith(".lock") or word == "$(LOCK)" for word in args):
                found += 1
                assert "--no-deps" in args and "--require-hashes" in args, (source, args)
    assert found >= 2
