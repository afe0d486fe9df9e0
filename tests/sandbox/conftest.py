"""Sandbox fixtures: the real Docker engine with the sandbox image, and provider factories.

With TASKYARD_TEST_ENGINE_PROXY=1 the docker providers (and the worker processes tests start)
reach the engine as a tool worker does in a deployment: through an engine proxy, as the worker
"tools"; `docker_client`, the tests' own view of the engine, stays direct.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import docker
import pytest
from pydantic import SecretStr

from devstack.engine_proxy import EngineAccess, start_engine_proxy
from devstack.procs import Processes
from services.engine_proxy import CALLER_LABEL
from taskyard.plumbing.settings import ToolWorkerSettings
from taskyard.sandbox import LocalSandboxProvider
from taskyard.sandbox.docker.provider import DockerSandboxProvider
from taskyard.sandbox.provider import KernelSandboxProvider

ProviderFactory = Callable[..., KernelSandboxProvider]

THROUGH_PROXY = os.environ.get("TASKYARD_TEST_ENGINE_PROXY") == "1"
WORKER = "tools"  # the worker the providers are, to the proxy
ENGINE_ENV = dict(os.environ)  # DOCKER_HOST and the rest, before the proxy's replace them


def left_by_a_worker(labels: dict[str, str]) -> dict[str, str]:
    """The labels of a container a worker made (the proxy adds whose it is), for a test that
    makes one on the engine directly."""
    return {**labels, CALLER_LABEL: WORKER} if THROUGH_PROXY else labels


@pytest.fixture(scope="package")
def engine_proxy(
    sandbox_image: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[EngineAccess | None]:
    """With TASKYARD_TEST_ENGINE_PROXY=1, an engine proxy, and DOCKER_HOST naming it and the
    worker `WORKER`'s token (for this process and the workers it starts); else None."""
    if not THROUGH_PROXY:
        yield None
        return
    run_dir = tmp_path_factory.mktemp("engine-proxy")
    access = EngineAccess.for_workers([WORKER], f"unix://{run_dir}/engine-proxy.sock")
    allowed = {
        "TASKYARD_SANDBOX_IMAGE": sandbox_image,
        "TASKYARD_ENGINE_PROXY_RUNTIMES": "runc,runsc",
    }
    with Processes(log_dir=run_dir) as procs, pytest.MonkeyPatch.context() as env:
        start_engine_proxy(procs, "engine_proxy", access, allowed)
        for key, value in access.worker_env(WORKER).items():
            env.setenv(key, value)
        yield access


@pytest.fixture(scope="session")
def docker_client(sandbox_image: str) -> Iterator[docker.DockerClient]:
    """A client of a running engine holding the sandbox image (built once, if missing): the
    engine itself, never through a proxy."""
    client = docker.from_env(environment=ENGINE_ENV)
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
    docker_client: docker.DockerClient,
    settings: ToolWorkerSettings,
    engine_proxy: EngineAccess | None,
) -> Iterator[ProviderFactory]:
    """Docker providers that the test's teardown closes (through the engine proxy, each makes
    its client from the environment, as a tool worker does)."""
    client = None if engine_proxy else docker_client
    token = SecretStr(engine_proxy.tokens[WORKER] if engine_proxy else "")

    def build(settings: ToolWorkerSettings = settings, **kw: object) -> KernelSandboxProvider:
        as_worker = settings.model_copy(update={"sandbox_engine_token": token})
        return DockerSandboxProvider(as_worker, client=client, **kw)

    yield from _factory(build)


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
def shape(request: pytest.FixtureRequest, make_provider: ProviderFactory) -> str:
    """Which of `make_provider`'s backends this run is: docker, forks, bwrap or unshare."""
    return str(request.node.callspec.params["make_provider"])


@pytest.fixture
def provider(make_provider: ProviderFactory) -> KernelSandboxProvider:
    """Every backend in turn: the behaviours a session promises hold for each."""
    return make_provider()
