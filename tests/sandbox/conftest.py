"""Sandbox fixtures: the real Docker engine with the sandbox image, and provider factories."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import docker
import pytest

from taskyard.plumbing.settings import ToolWorkerSettings
from taskyard.sandbox import LocalSandboxProvider
from taskyard.sandbox.docker.provider import DockerSandboxProvider
from taskyard.sandbox.provider import KernelSandboxProvider

ProviderFactory = Callable[..., KernelSandboxProvider]


@pytest.fixture(scope="session")
def docker_client(sandbox_image: str) -> Iterator[docker.DockerClient]:
    """A client of a running engine holding the sandbox image (built once, if missing)."""
    client = docker.from_env()
    assert client.images.get(sandbox_image).labels.get("taskyard.inputs")
    yield client
    client.close()


@pytest.fixture
def settings(sandbox_image: str) -> ToolWorkerSettings:
    """One container per session (the fork server's shape is `FORKS`, below)."""
    return ToolWorkerSettings(
        sandbox_image=sandbox_image,
        sandbox_warm_pool=0,
        sandbox_memory="128m",
        sandbox_interrupt_grace_s=1.0,
        sandbox_sessions_per_container=1,
    )


# The docker backend with a fork server per container: a tenant's sessions share one.
FORKS = {"sandbox_sessions_per_container": 8}


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
    docker_client: docker.DockerClient, settings: ToolWorkerSettings
) -> Iterator[ProviderFactory]:
    """Docker providers that the test's teardown closes."""
    yield from _factory(
        lambda settings=settings, **kw: DockerSandboxProvider(settings, client=docker_client, **kw)
    )


@pytest.fixture
def make_local_provider(settings: ToolWorkerSettings) -> Iterator[ProviderFactory]:
    """Local providers (bwrap by default) that the test's teardown closes."""
    yield from _factory(lambda settings=settings, **kw: LocalSandboxProvider(settings, **kw))


@pytest.fixture(params=["docker", "forks", "bwrap", "unshare"])
def make_provider(
    request: pytest.FixtureRequest,
    settings: ToolWorkerSettings,
    make_docker_provider: ProviderFactory,
    make_local_provider: ProviderFactory,
) -> ProviderFactory:
    """Each backend in turn, with settings changed: ``make_provider(sandbox_cpus=1)``."""

    def make(**changes: object) -> KernelSandboxProvider:
        changed = settings.model_copy(update=changes)
        if request.param == "docker":
            return make_docker_provider(settings=changed)
        if request.param == "forks":
            return make_docker_provider(settings=changed.model_copy(update=FORKS))
        return make_local_provider(settings=changed, launcher=request.param)

    return make


@pytest.fixture
def provider(make_provider: ProviderFactory) -> KernelSandboxProvider:
    """Every backend in turn: the behaviours a session promises hold for each."""
    return make_provider()
