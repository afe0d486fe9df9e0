"""make and the image install the locked packages with their hashes checked and with no
dependencies resolved (the lock is complete), then taskyard with no dependencies: no `pip
install` resolves a package the lock does not pin by hash. What these lines do against an index
that publishes a newer release is tested in test_install_resolves_nothing.py."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _pip_installs(text: str) -> list[list[str]]:
    """The arguments of every `pip install` the text runs (recipe lines, RUN && chains)."""
    joined = re.sub(r"\\\n", " ", text)
    commands = (part for line in joined.splitlines() for part in line.split("&&"))
    found = []
    for command in commands:
        words = shlex.split(command, comments=True)
        for i, word in enumerate(words[:-1]):
            if word.endswith("pip") and words[i + 1] == "install":
                found.append(words[i + 2 :])
    return found


def _checked(installs: list[list[str]]) -> list[list[str]]:
    """The installs that may fetch a dependency unchecked: neither hashed nor --no-deps."""
    return [args for args in installs if "--require-hashes" not in args and "--no-deps" not in args]


def _makefile_recipe(target: str) -> tuple[str, str]:
    text = (ROOT / "Makefile").read_text()
    match = re.search(rf"^{re.escape(target)}:(.*)\n((?:\t.*\n)+)", text, re.M)
    assert match, target
    return match.group(1), match.group(2)


def test_make_installs_the_dev_lock_with_hashes_then_taskyard_alone() -> None:
    prerequisites, recipe = _makefile_recipe("$(VENV)/.installed")
    assert {"pyproject.toml", "requirements-dev.lock"} <= set(prerequisites.split())
    assert "install-lock VENV=$(VENV) LOCK=requirements-dev.lock" in recipe
    installs = _pip_installs(recipe)
    assert len(installs) == 1
    assert installs[0][-2:] == ["-e", "."] and "--no-deps" in installs[0]
    steps = [line.strip() for line in recipe.splitlines()]
    assert steps.index("$(BIN)/pip check") > steps.index(
        "$(BIN)/pip install " + " ".join(installs[0])
    )
    assert "$(BIN)/python scripts/checkout_pth.py" in steps
    _, lock_recipe = _makefile_recipe("install-lock")
    locks = _pip_installs(lock_recipe)
    assert len(locks) == 1
    assert {"--no-deps", "--require-hashes", "-r", "$(LOCK)"} <= set(locks[0])
    assert "$(BIN)/pip check" in lock_recipe
    assert _checked(installs + locks) == []


def test_the_image_installs_the_service_lock_with_hashes_then_taskyard_alone() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^COPY .*\brequirements\.lock\b", dockerfile, re.M)
    installs = _pip_installs(dockerfile)
    assert len(installs) == 2
    assert {"--no-deps", "--require-hashes", "-r", "requirements.lock"} <= set(installs[0])
    assert installs[1][-1] == "." and "--no-deps" in installs[1]
    assert _checked(installs) == []


def test_an_unhashed_install_is_seen() -> None:
    installs = _pip_installs("RUN pip install -c requirements.lock '.[service]' \\\n && true\n")
    assert installs == [["-c", "requirements.lock", ".[service]"]]
    assert _checked(installs) == installs
