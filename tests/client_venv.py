"""A clean virtualenv holding what `pip install <checkout>` (no extras) installs, made offline.

- taskyard's wheel: setuptools' own `egg_info` and `build_py` write the metadata and choose the
  files (packages.find, package-data), as they do under `pip wheel`; here they are zipped as a
  pure-Python wheel. `pip wheel --no-build-isolation` cannot build it offline in the dev venv:
  its setuptools (65.5, below the build's >=68) has no `bdist_wheel` without the `wheel`
  package, and with isolation pip fetches a setuptools from the index.
- The base requirements, followed through each distribution's own with their markers
  evaluated for this Python; each distribution is copied from this venv by its RECORD.
- The wheel installed into the clean venv by pip, with --no-deps --no-index.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
# setuptools' own commands; quiet, as it warns that pyproject's [tool.setuptools] is beta.
_SETUP = "import warnings; warnings.simplefilter('ignore'); from setuptools import setup; setup()"


def base_distributions() -> list[metadata.Distribution]:
    """The distributions the base install needs: its requirements and theirs, recursively,
    each with the extras asked of it, where their markers hold for this Python."""
    found: dict[str, metadata.Distribution] = {}
    walked: set[tuple[str, frozenset[str]]] = set()
    pending = [Requirement(line) for line in PROJECT["dependencies"]]
    while pending:
        wanted = pending.pop()
        name, extras = canonicalize_name(wanted.name), frozenset(wanted.extras)
        if (name, extras) in walked:
            continue
        walked.add((name, extras))
        found[name] = metadata.distribution(name)
        needs = (Requirement(line) for line in found[name].requires or [])
        pending += [need for need in needs if _applies(need, extras)]
    return sorted(found.values(), key=lambda d: canonicalize_name(d.metadata["Name"]))


def _applies(requirement: Requirement, extras: frozenset[str]) -> bool:
    """Whether `requirement` holds for this Python, given the extras its dependent was
    asked for."""
    marker = requirement.marker
    return marker is None or any(marker.evaluate({"extra": e}) for e in ("", *extras))


def build_wheel(out: Path) -> Path:
    """taskyard's wheel from the checkout, offline (see the module's docstring)."""
    meta, lib = out / "meta", out / "lib"
    meta.mkdir(parents=True)
    subprocess.run(
        [sys.executable, "-c", _SETUP, "-q", "egg_info", "--egg-base", meta,
         "build_py", "--build-lib", lib],
        cwd=ROOT, env=_plain_env(), check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    egg_info = meta / f"{PROJECT['name']}.egg-info"
    info = f"{PROJECT['name']}-{PROJECT['version']}.dist-info"
    files = {path.relative_to(lib).as_posix(): path.read_bytes() for path in _files(lib)}
    files[f"{info}/METADATA"] = (egg_info / "PKG-INFO").read_bytes() + _requires_dist()
    files[f"{info}/entry_points.txt"] = (egg_info / "entry_points.txt").read_bytes()
    files[f"{info}/top_level.txt"] = (egg_info / "top_level.txt").read_bytes()
    files[f"{info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: tests/client_venv.py\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n"
    )
    wheel = out / f"{PROJECT['name']}-{PROJECT['version']}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in files.items():
            archive.writestr(name, content)
        archive.writestr(f"{info}/RECORD", _record(files, f"{info}/RECORD"))
    return wheel


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def _requires_dist() -> bytes:
    """The base and extra requirements as Core Metadata's `Requires-Dist` lines (setuptools
    65.5 keeps them in requires.txt, which bdist_wheel would convert)."""
    lines = [*PROJECT["dependencies"]]
    for extra, requirements in PROJECT["optional-dependencies"].items():
        for line in requirements:
            requirement = Requirement(line)
            held = f"({requirement.marker}) and " if requirement.marker else ""
            requirement.marker = None
            lines.append(f'{requirement}; {held}extra == "{extra}"')
    return "".join(f"Requires-Dist: {line}\n" for line in lines).encode()


def _record(files: dict[str, bytes], record: str) -> str:
    rows = []
    for name, content in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(content).digest()).rstrip(b"=")
        rows.append(f"{name},sha256={digest.decode()},{len(content)}\n")
    return "".join(rows) + f"{record},,\n"


@dataclass(frozen=True)
class ClientVenv:
    """The clean venv: its `bin` and `site-packages`; `run` runs a command of it."""

    bin: Path
    site_packages: Path

    def run(self, *argv: str, cwd: Path, stdin: str = "") -> subprocess.CompletedProcess[str]:
        """`argv` (a command of the venv's bin by name) with none of this run's Python paths,
        in `cwd` (not the checkout: its services/ and devstack/ would import from there)."""
        return subprocess.run(
            [str(self.bin / argv[0]), *argv[1:]], cwd=cwd, env=_plain_env(), input=stdin,
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip


def make_client_venv(where: Path) -> ClientVenv:
    """A venv at `where / "venv"` holding the client install alone (built in `where`)."""
    venv = where / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, timeout=60)
    purelib = subprocess.run(
        [venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        env=_plain_env(), check=True, capture_output=True, text=True, timeout=30,
    ).stdout.strip()  # fmt: skip
    for distribution in base_distributions():
        _copy(distribution, Path(purelib))
    wheel = build_wheel(where / "build")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install", "-q",
         "--no-deps", "--no-index", wheel],
        env={**_plain_env(), "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    return ClientVenv(venv / "bin", Path(purelib))


def _copy(distribution: metadata.Distribution, site_packages: Path) -> None:
    """The distribution's files under site-packages, by its RECORD (its scripts elsewhere,
    written for this venv's Python, and byte code are left out)."""
    listed = distribution.files
    assert listed is not None, f"{distribution.metadata['Name']} has no RECORD"
    for file in listed:
        if file.parts[0] == ".." or file.suffix == ".pyc":
            continue
        target = site_packages / file
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(Path(str(distribution.locate_file(file))), target)


def _plain_env() -> dict[str, str]:
    """The environment without this run's Python paths, pip's settings or virtualenv."""
    dropped = ("PYTHON", "PIP_", "VIRTUAL_ENV")
    return {k: v for k, v in os.environ.items() if not k.startswith(dropped)}
