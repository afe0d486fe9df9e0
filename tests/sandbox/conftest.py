"""Sandbox fixtures: the real Docker engine with the sandbox image, and provider factories."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import docker
import pytest

from shared.sandbox import DockerSandboxProvider, LocalSandboxProvider
from shared.sandbox.provider import KernelSandboxProvider
from shared.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "taskyard/sandbox:latest"

ProviderFactory = Callable[..., KernelSandboxProvider]


@pytest.fixture(scope="session")
def docker_client() -> Iterator[docker.DockerClient]:
    """A client of a running engine holding the sandbox image (built once, if missing)."""
    subprocess.run([ROOT / "scripts" / "setup_docker.sh"], check=True)
    subprocess.run([ROOT / "scripts" / "build_sandbox_image.sh"], check=True)
    client = docker.from_env()
    assert client.images.get(IMAGE).labels.get("taskyard.inputs")
    yield client
    client.close()


@pytest.fixture
def settings() -> Settings:
    return Settings(sandbox_image=IMAGE, sandbox_warm_pool=0, sandbox_memory="128m")


def _factory(build: Callable[..., KernelSandboxProvider]) -> Iterator[ProviderFactory]:
    made: list[KernelSandboxProvider] = []

    def make(**kwargs: object) -> KernelSandboxProvider:
        made.append(build(**kwargs))
        return made[-1]

    yield make
    for provider in made:
        provider.close_all()


@pytest.fixture
def make_docker_provider(
    docker_client: docker.DockerClient, settings: Settings
) -> Iterator[ProviderFactory]:
    """Docker providers that the test's teardown closes."""
    yield from _factory(lambda **kw: DockerSandboxProvider(settings, client=docker_client, **kw))


@pytest.fixture
def make_local_provider(settings: Settings) -> Iterator[ProviderFactory]:
    """Local providers (bwrap by default) that the test's teardown closes."""
    yield from _factory(lambda **kw: LocalSandboxProvider(settings, **kw))


@pytest.fixture(params=["docker", "bwrap", "unshare"])
def provider(
    request: pytest.FixtureRequest,
    make_docker_provider: ProviderFactory,
    make_local_provider: ProviderFactory,
) -> KernelSandboxProvider:
    """Every backend in turn: the behaviours a session promises hold for each."""
    if request.param == "docker":
        return make_docker_provider()
    return make_local_provider(launcher=request.param)
