"""The locks pin, with hashes, what pyproject.toml declares: requirements.lock the image's
`.[service]`, requirements-dev.lock make's `.[service,dev]`; each installs with
`pip install --require-hashes -r`, which refuses a file whose sha256 the lock does not list."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from scripts.lock_environments import Entry, entries

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
SERVICE_LOCK = ROOT / "requirements.lock"
DEV_LOCK = ROOT / "requirements-dev.lock"
# The extras each lock holds, besides the base dependencies.
LOCKED_EXTRAS = {SERVICE_LOCK: ["web", "service"], DEV_LOCK: ["web", "service", "dev"]}


def _pins(lock: Path) -> dict[str, Entry]:
    return {entry.name: entry for entry in entries(lock)}


def _declared(extras: list[str]) -> list[Requirement]:
    optional = PROJECT["optional-dependencies"]
    lines = [*PROJECT["dependencies"], *(line for extra in extras for line in optional[extra])]
    found = [Requirement(line) for line in lines]
    # `taskyard[web]`: the service extra names the web one; taskyard is installed on its own.
    return [r for r in found if canonicalize_name(r.name) != PROJECT["name"]]


def _unmet(declared: list[Requirement], pins: dict[str, Entry]) -> list[str]:
    """Each declared requirement the pins leave out, or pin at a version outside its range."""
    unmet = []
    for requirement in declared:
        pin = pins.get(canonicalize_name(requirement.name))
        if pin is None or not requirement.specifier.contains(pin.version, prereleases=True):
            unmet.append(str(requirement))
    return unmet


@pytest.mark.parametrize("lock", [SERVICE_LOCK, DEV_LOCK], ids=lambda p: p.name)
def test_the_lock_pins_every_declared_package_in_its_range(lock: Path) -> None:
    declared = _declared(LOCKED_EXTRAS[lock])
    assert len(declared) > 10, "declared requirements not read"
    assert _unmet(declared, _pins(lock)) == []


@pytest.mark.parametrize("lock", [SERVICE_LOCK, DEV_LOCK], ids=lambda p: p.name)
def test_every_entry_of_the_lock_is_an_exact_version_with_a_sha256(lock: Path) -> None:
    pins = entries(lock)
    assert len(pins) > 50
    unhashed = [p.name for p in pins if not p.hashes]
    assert unhashed == []
    assert all(re.fullmatch(r"sha256:[0-9a-f]{64}", h) for p in pins for h in p.hashes)


@pytest.mark.parametrize("lock", [SERVICE_LOCK, DEV_LOCK], ids=lambda p: p.name)
def test_the_lock_says_how_it_is_made_and_installed(lock: Path) -> None:
    header = lock.read_text().split("\n\n", 1)[0]
    assert header.startswith("# ")
    assert "`bash scripts/lock.sh`" in header
    assert f"`pip install --no-deps --require-hashes -r {lock.name}`" in header


def test_the_image_has_the_versions_make_installs() -> None:
    service, dev = _pins(SERVICE_LOCK), _pins(DEV_LOCK)
    differ = [n for n, pin in service.items() if n not in dev or dev[n].version != pin.version]
    assert differ == []


def test_the_check_sees_a_missing_package_a_version_out_of_range_and_no_hash() -> None:
    pins = _pins(SERVICE_LOCK)
    declared = _declared(LOCKED_EXTRAS[SERVICE_LOCK])
    without_redis = {n: p for n, p in pins.items() if n != "redis"}
    assert _unmet(declared, without_redis) == ["redis<9,>=8.1"]
    too_new = {**pins, "redis": Entry("redis", "9.0.0", None, pins["redis"].hashes)}
    assert _unmet(declared, too_new) == ["redis<9,>=8.1"]


def test_an_entry_is_read_with_its_marker_and_hashes(tmp_path: Path) -> None:
    lock = tmp_path / "x.lock"
    lock.write_text(
        "# header\n\nredis==8.1.0 \\\n    --hash=sha256:ab\n    # via x\n"
        "async-timeout==5.0.1 ; python_full_version < '3.11.3' \\\n    --hash=sha256:cd\n"
    )
    redis, timeout = entries(lock)
    assert (redis.name, redis.version, redis.marker, redis.hashes) == (
        "redis",
        "8.1.0",
        None,
        ("sha256:ab",),
    )
    assert str(timeout.marker) == 'python_full_version < "3.11.3"'
    assert timeout.hashes == ("sha256:cd",)
