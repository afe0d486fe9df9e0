"""Each lock installs on every Python `requires-python` admits and on every platform the README
names, checked here without those interpreters: from the project's declared requirements,
every package's own requirements are followed with their markers evaluated for each
environment, and each one that applies must be a lock entry that applies there too, at a
version in its range. (A lock made on Python 3.11.7 once left out async-timeout, which redis
needs below 3.11.3: `pip install --require-hashes` refused it on Debian 12's 3.11.2.)"""

from __future__ import annotations

import email
import sys
import tomllib
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from scripts.lock_environments import Entry, entries, environments, python_versions

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
# What `make` fetched for the entries this Python skips (scripts/lock_environments.py).
FETCHED = Path(sys.prefix) / "lock-wheels"
LOCKS = {
    "requirements.lock": ["web", "service"],
    "requirements-dev.lock": ["web", "service", "dev"],
}


@dataclass(frozen=True)
class Need:
    """A requirement met while walking: who asked for it, under which extras."""

    requirement: Requirement
    by: str


def _declared(extras: list[str]) -> list[Need]:
    optional = PROJECT["optional-dependencies"]
    lines = [*PROJECT["dependencies"], *(line for extra in extras for line in optional[extra])]
    found = (Requirement(line) for line in lines)
    own = canonicalize_name(PROJECT["name"])
    return [Need(r, "pyproject.toml") for r in found if canonicalize_name(r.name) != own]


def _wheel_requirements(entry: Entry) -> list[str] | None:
    stem = f"{entry.name.replace('-', '_')}-{entry.version}-"
    for wheel in FETCHED.glob("*.whl"):
        if wheel.name.lower().startswith(stem):
            with zipfile.ZipFile(wheel) as archive:
                name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
                parsed = email.message_from_bytes(archive.read(name))
            return parsed.get_all("Requires-Dist") or []
    return None


def _requirements(entry: Entry) -> list[Requirement] | None:
    """The entry's own requirements, from this virtualenv or the fetched wheel; None if
    neither has its metadata at the locked version."""
    try:
        installed = metadata.distribution(entry.name)
    except metadata.PackageNotFoundError:
        lines = _wheel_requirements(entry)
    else:
        same = installed.version == entry.version
        lines = (installed.requires or []) if same else _wheel_requirements(entry)
    return None if lines is None else [Requirement(line) for line in lines]


def _applies(marker: Marker | None, env: dict[str, str], extras: Iterable[str]) -> bool:
    if marker is None:
        return True
    return any(marker.evaluate({**env, "extra": extra}) for extra in ("", *extras))


def unmet(
    needs: list[Need],
    lock: list[Entry],
    requirements: dict[str, list[Requirement] | None],
    env: dict[str, str],
) -> list[str]:
    """Every requirement reachable from `needs` in `env` that the lock's entries for `env`
    leave out, pin outside its range, or whose metadata is not here to follow."""
    active: dict[str, Entry] = {}
    problems: list[str] = []
    for entry in (e for e in lock if e.applies(env)):
        if entry.name in active:
            problems.append(f"{entry.name} is locked twice here")
        active[entry.name] = entry
    walked: set[tuple[str, frozenset[str]]] = set()
    pending = [n for n in needs if _applies(n.requirement.marker, env, ())]
    while pending:
        need = pending.pop()
        name, wanted = canonicalize_name(need.requirement.name), need.requirement
        entry = active.get(name)
        if entry is None:
            problems.append(f"{name} ({wanted}, needed by {need.by}) is not locked here")
            continue
        if not wanted.specifier.contains(entry.version, prereleases=True):
            problems.append(f"{name}=={entry.version} is outside {wanted} (needed by {need.by})")
        key = (name, frozenset(wanted.extras))
        if key in walked:
            continue
        walked.add(key)
        own = requirements.get(name)
        if own is None:
            problems.append(f"no metadata of {name}=={entry.version} to follow")
            continue
        by = f"{name}=={entry.version}"
        pending += [Need(r, by) for r in own if _applies(r.marker, env, wanted.extras)]
    return problems


def _all_requirements(lock: list[Entry]) -> dict[str, list[Requirement] | None]:
    return {entry.name: _requirements(entry) for entry in lock}


def _markers(lock: list[Entry], requirements: dict[str, list[Requirement] | None]) -> list[Marker]:
    found = [e.marker for e in lock if e.marker is not None]
    found += [r.marker for rs in requirements.values() for r in rs or () if r.marker is not None]
    return found


@pytest.mark.parametrize("lock_name", LOCKS)
def test_the_lock_installs_on_every_admitted_python_and_platform(lock_name: str) -> None:
    lock = entries(ROOT / lock_name)
    requirements = _all_requirements(lock)
    needs = _declared(LOCKS[lock_name])
    checked, problems = 0, []
    for python, platform, env in environments(_markers(lock, requirements)):
        checked += 1
        found = unmet(needs, lock, requirements, env)
        problems += [f"Python {python} {platform}: {problem}" for problem in found]
    assert checked >= 4 * 6, "too few environments checked"
    assert problems == []


def test_the_versions_checked_include_both_sides_of_each_marker_boundary() -> None:
    lock = entries(ROOT / "requirements.lock")
    versions = python_versions(_markers(lock, _all_requirements(lock)))
    # redis: `async-timeout>=4.0.3; python_full_version < "3.11.3"`.
    assert {"3.11.0", "3.11.2", "3.11.3", "3.12.0", "3.12.99"} <= set(versions)
    assert all(v.startswith(("3.11.", "3.12.")) for v in versions)


def test_a_lock_made_on_a_later_python_is_caught() -> None:
    lock = entries(ROOT / "requirements.lock")
    requirements = _all_requirements(lock)
    needs = _declared(LOCKS["requirements.lock"])
    # The lock pip-compile wrote on 3.11.7: no async-timeout at all.
    later = [e for e in lock if e.name != "async-timeout"]
    fresh_debian = next(
        env
        for python, platform, env in environments(_markers(lock, requirements))
        if python == "3.11.2" and platform == "manylinux2014_x86_64"
    )
    found = unmet(needs, later, requirements, fresh_debian)
    assert len(found) == 1 and found[0].startswith("async-timeout ")
    assert "needed by redis==" in found[0]
    # And the same entry pinned for every Python but out of redis's range.
    old = [Entry(e.name, "4.0.0", None, e.hashes) if e.name == "async-timeout" else e for e in lock]
    assert any("outside" in p for p in unmet(needs, old, requirements, fresh_debian))


def test_an_entry_whose_metadata_is_missing_is_reported_not_skipped() -> None:
    lock = entries(ROOT / "requirements.lock")
    requirements = {**_all_requirements(lock), "redis": None}
    env = next(env for _, _, env in environments([]))
    found = unmet(_declared(LOCKS["requirements.lock"]), lock, requirements, env)
    assert [p for p in found if p.startswith("no metadata of redis==")]
