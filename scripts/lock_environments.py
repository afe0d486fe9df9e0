"""The environments the locks must install on, and the lock entries this Python skips.

A lock made on one interpreter can miss a package that another one needs (redis needs
async-timeout below Python 3.11.3). `tests/contracts/test_lock_environments.py` walks every
locked package's requirements with the markers evaluated for each environment below, without
needing those interpreters; it reads each package's metadata from this virtualenv, or, for an
entry this Python skips (its marker is false here), from the wheel this script fetches:

    python scripts/lock_environments.py fetch DEST LOCK...

(`make` runs it after installing the dev lock; the wheels are hash-checked like the install.)
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from packaging.markers import Marker
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
REQUIRES_PYTHON = SpecifierSet(
    tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
)

# The platforms the README names: Linux on x86_64 and arm64 (make, the services), macOS (the
# library and the CLI on a laptop), each with pip's platform tag for fetching a wheel.
PLATFORMS: dict[str, dict[str, str]] = {
    "manylinux2014_x86_64": {"sys_platform": "linux", "platform_machine": "x86_64"},
    "manylinux2014_aarch64": {"sys_platform": "linux", "platform_machine": "aarch64"},
    "macosx_11_0_arm64": {"sys_platform": "darwin", "platform_machine": "arm64"},
    "macosx_10_12_x86_64": {"sys_platform": "darwin", "platform_machine": "x86_64"},
}
_SYSTEM = {"linux": "Linux", "darwin": "Darwin"}
_VERSION_IN_MARKER = re.compile(r"python(?:_full)?_version\s*[<>=!~]+\s*['\"]([0-9.]+)['\"]")


@dataclass(frozen=True)
class Entry:
    """One locked package: its exact version, where it applies and its hashes."""

    name: str
    version: str
    marker: Marker | None
    hashes: tuple[str, ...] = field(repr=False)

    def applies(self, environment: dict[str, str]) -> bool:
        return self.marker is None or self.marker.evaluate(environment)


def entries(lock: Path) -> list[Entry]:
    """The lock's entries: `name==version [; marker]` with their `--hash=` options."""
    joined = re.sub(r"\\\n", " ", lock.read_text())
    found = []
    for line in joined.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        hashes = tuple(re.findall(r"--hash=(\S+)", line))
        requirement = re.sub(r"\s+--hash=\S+", "", line)
        pin, _, marker = requirement.partition(";")
        name, _, version = pin.strip().partition("==")
        found.append(
            Entry(canonicalize_name(name), version, Marker(marker) if marker else None, hashes)
        )
    return found


def python_versions(markers: Iterable[Marker]) -> list[str]:
    """The interpreter versions worth checking: both ends of `requires-python`, and each
    version any marker compares with, and the release just before it."""
    seen = {"3.11.0", "3.12.0", "3.12.99"}
    for marker in markers:
        for literal in _VERSION_IN_MARKER.findall(str(marker)):
            version = Version(literal)
            major, minor, patch = (*version.release, 0, 0)[:3]
            seen.add(f"{major}.{minor}.{patch}")
            if patch:
                seen.add(f"{major}.{minor}.{patch - 1}")
            elif minor:
                seen.add(f"{major}.{minor - 1}.99")
    admitted = (v for v in seen if REQUIRES_PYTHON.contains(v))
    return sorted(admitted, key=Version)


def environment(python: str, platform: str) -> dict[str, str]:
    """A marker environment for CPython `python` on `platform` (a key of PLATFORMS)."""
    where = PLATFORMS[platform]
    return {
        "implementation_name": "cpython",
        "implementation_version": python,
        "os_name": "posix",
        "platform_machine": where["platform_machine"],
        "platform_python_implementation": "CPython",
        "platform_release": "",
        "platform_system": _SYSTEM[where["sys_platform"]],
        "platform_version": "",
        "python_full_version": python,
        "python_version": ".".join(python.split(".")[:2]),
        "sys_platform": where["sys_platform"],
        "extra": "",
    }


def environments(markers: Iterable[Marker]) -> Iterator[tuple[str, str, dict[str, str]]]:
    """(python, platform, marker environment) for every version and platform to check."""
    for python in python_versions(markers):
        for platform in PLATFORMS:
            yield python, platform, environment(python, platform)


def skipped_here(lock_entries: list[Entry]) -> list[tuple[Entry, str, str]]:
    """The entries this Python skips but a supported environment installs, each with one
    (python, platform) that installs it."""
    markers = [e.marker for e in lock_entries if e.marker is not None]
    found = []
    for entry in lock_entries:
        if entry.marker is None or entry.marker.evaluate():
            continue
        where = next(((p, pf) for p, pf, env in environments(markers) if entry.applies(env)), None)
        if where is not None:
            found.append((entry, *where))
    return found


def fetch(dest: Path, locks: list[Path]) -> None:
    """Download, hash-checked and without dependencies, the wheel of every entry of `locks`
    that this Python skips, into `dest` (one pip run per target environment)."""
    dest.mkdir(parents=True, exist_ok=True)
    wanted: dict[tuple[str, str], dict[str, Entry]] = {}
    for lock in locks:
        for entry, python, platform in skipped_here(entries(lock)):
            wanted.setdefault((python, platform), {})[entry.name] = entry
    for (python, platform), chosen in wanted.items():
        with tempfile.NamedTemporaryFile("w", suffix=".txt") as requirements:
            for entry in chosen.values():
                hashes = " ".join(f"--hash={h}" for h in entry.hashes)
                requirements.write(f"{entry.name}=={entry.version} {hashes}\n")
            requirements.flush()
            subprocess.run(
                [
                    *(sys.executable, "-m", "pip", "download", "-q"),
                    *("--disable-pip-version-check", "--no-deps", "--only-binary=:all:"),
                    *("--python-version", python, "--platform", platform),
                    *("--require-hashes", "-d", str(dest), "-r", requirements.name),
                ],
                check=True,
            )


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    fetcher = commands.add_parser(
        "fetch", help="download the wheels of the entries this Python skips"
    )
    fetcher.add_argument("dest", type=Path, help="the folder the wheels go to")
    fetcher.add_argument("locks", type=Path, nargs="+", help="the lock files to read")
    args = parser.parse_args(argv)
    fetch(args.dest, args.locks)


if __name__ == "__main__":
    main(sys.argv[1:])
