"""gVisor's tests on an engine with or without runsc registered.

With it, each test runs as written. Without it (a machine where `make deps` could not install
or register runsc; `TASKYARD_TEST_GVISOR_RUNTIME=runsc-absent` plays one on any machine),
`make_gvisor` asserts the clear refusal instead (`check` and a first cell each name the missing
runtime and how to add it) and the test ends there, passing; the run's summary lists each such
test, so that a machine without gVisor is never mistaken for one where it works.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import ParamSpec

import docker
import pytest

from taskyard.sandbox import SandboxUnavailable
from taskyard.sandbox.docker import DockerSandboxProvider

P = ParamSpec("P")
RUNTIME = os.environ.get("TASKYARD_TEST_GVISOR_RUNTIME", "runsc")
REFUSED_ONLY: list[tuple[str, str]] = []  # (test, refusal) where only the refusal was asserted


class RuntimeMissing(Exception):
    """The engine has no gVisor runtime: the test asserted its refusal instead."""


def under_gvisor(test: Callable[P, None]) -> Callable[P, None]:
    """Run `test`; where the engine has no gVisor, its refusal (asserted) is the outcome."""

    @functools.wraps(test)
    def run(*args: P.args, **kwargs: P.kwargs) -> None:
        try:
            test(*args, **kwargs)
        except RuntimeMissing as missing:
            REFUSED_ONLY.append((test.__name__, str(missing)))

    return run


def engine_has(client: docker.DockerClient, runtime: str) -> bool:
    return runtime in (client.info().get("Runtimes") or {})


def assert_refused(provider: DockerSandboxProvider, runtime: str) -> str:
    """A provider under a runtime the engine lacks refuses, naming it and how to add it,
    both when checked and at a session's first cell; what it said."""
    with pytest.raises(SandboxUnavailable) as checked:
        provider.check()
    with pytest.raises(SandboxUnavailable) as started:
        provider.get("t:refused").run("1", 30.0)
    for refused in (checked, started):
        said = str(refused.value)
        assert f"the Docker engine has no runtime {runtime!r}" in said, said
        assert "apt-get install runsc" in said and "setup_docker.sh" in said, said
    return str(checked.value)


def summarize(write_line: Callable[[str], None]) -> None:
    """For the run's summary: the gVisor tests that ran against an engine without it."""
    if not REFUSED_ONLY:
        return
    write_line(
        f"gVisor ({RUNTIME!r}) is not registered with this Docker engine: "
        f"{len(REFUSED_ONLY)} test(s) asserted its refusal only: "
        + ", ".join(name for name, _ in REFUSED_ONLY)
    )
    write_line(f"  the refusal: {REFUSED_ONLY[0][1]}")
