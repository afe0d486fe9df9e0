"""The engine proxy as the tool workers meet it: a child process in front of the real engine,
and the Docker SDK as each worker makes it (`DOCKER_HOST` and its token from its
environment)."""

from __future__ import annotations

import contextlib
import io
import tarfile
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import docker
import pytest

from devstack.engine_proxy import EngineAccess, raw_engine, start_engine_proxy
from devstack.procs import Processes
from services.engine_proxy import TOKEN_HEADER
from taskyard.plumbing.settings import ToolWorkerSettings
from taskyard.sandbox.docker.provider import DockerSandboxProvider
from taskyard.sandbox.docker.spec import ContainerSpec

WORKERS = ("tools-a", "tools-b", "tools-c")
MAX_MEMORY = 512 << 20
MAX_PIDS = 1024
Connect = Callable[[str], docker.DockerClient]


@pytest.fixture(scope="session")
def engine() -> Iterator[docker.DockerClient]:
    """The engine itself, as an operator (and the tests' own checks) reaches it."""
    client = docker.DockerClient(base_url=raw_engine())
    yield client
    client.close()


@pytest.fixture(scope="session")
def access(sandbox_image: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EngineAccess]:
    """A running engine proxy for `WORKERS`, allowing runc only, 512m and 1024 pids at most."""
    run_dir = tmp_path_factory.mktemp("engine-proxy")
    access = EngineAccess.for_workers(WORKERS, f"unix://{run_dir}/engine-proxy.sock")
    limits = {
        "TASKYARD_SANDBOX_IMAGE": sandbox_image,
        "TASKYARD_ENGINE_PROXY_RUNTIMES": "runc",
        "TASKYARD_ENGINE_PROXY_MAX_MEMORY": str(MAX_MEMORY),
        "TASKYARD_ENGINE_PROXY_MAX_PIDS": str(MAX_PIDS),
    }
    with Processes(log_dir=run_dir) as procs:
        start_engine_proxy(procs, "engine_proxy", access, limits)
        yield access


@pytest.fixture
def as_worker(access: EngineAccess, monkeypatch: pytest.MonkeyPatch) -> Iterator[Connect]:
    """Docker clients made from a worker's environment, its token in every request's head: what
    code running in the tool worker (compromised) holds."""
    made: list[docker.DockerClient] = []

    def connect(name: str) -> docker.DockerClient:
        with monkeypatch.context() as env:
            for key, value in access.worker_env(name).items():
                env.setenv(key, value)
            client = docker.from_env()
        client.api.headers[TOKEN_HEADER] = access.tokens[name]
        made.append(client)
        return client

    yield connect
    for client in made:
        client.close()


@pytest.fixture
def provider_as(
    access: EngineAccess, monkeypatch: pytest.MonkeyPatch, sandbox_image: str
) -> Iterator[Callable[..., DockerSandboxProvider]]:
    """Docker sandbox providers made as a tool worker makes its own: no client handed in, the
    engine from the worker's environment."""
    made: list[DockerSandboxProvider] = []

    def make(name: str, **kwargs: Any) -> DockerSandboxProvider:
        with monkeypatch.context() as env:
            for key, value in access.worker_env(name).items():
                env.setenv(key, value)
            settings = ToolWorkerSettings(
                sandbox_image=sandbox_image, sandbox_warm_pool=0, sandbox_memory="128m"
            )
            made.append(DockerSandboxProvider(settings, **kwargs))
        return made[-1]

    yield make
    for provider in made:
        provider.close_all()


@pytest.fixture
def cleanup(engine: docker.DockerClient) -> Iterator[list[str]]:
    """Container ids the test made; removed afterwards through the engine itself."""
    ids: list[str] = []
    yield ids
    for container in ids:
        with contextlib.suppress(docker.errors.NotFound):
            engine.api.remove_container(container, force=True)


@pytest.fixture(scope="session")
def other_image(engine: docker.DockerClient) -> Iterator[str]:
    """An image on the engine that is not the sandbox's."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        info = tarfile.TarInfo("marker")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"ok"))
    tag = f"taskyard/not-the-sandbox:{uuid.uuid4().hex[:8]}"
    engine.api.import_image_from_data(data.getvalue(), repository=tag.split(":")[0],
                                      tag=tag.split(":")[1])  # fmt: skip
    yield tag
    engine.api.remove_image(tag, force=True)


def sandbox_kwargs(image: str, **changes: Any) -> dict[str, Any]:
    """`create_container`'s arguments for a sandbox as the tool worker makes one (its
    `ContainerSpec`, host config included), with `changes` over them: host config fields as
    `create_host_config` names them, the others as `create_container` does."""
    captured: dict[str, Any] = {}

    class Capture:
        def create_host_config(self, **kwargs: Any) -> dict[str, Any]:
            captured["host"] = kwargs
            return {}

        def create_container(self, image: str, **kwargs: Any) -> dict[str, str]:
            captured["container"] = {"image": image, **kwargs}
            return {"Id": ""}

    ContainerSpec(image=image, memory="128m").create(Capture(), {})  # type: ignore[arg-type]
    host = {**captured["host"]}
    container = {**captured["container"]}
    for key, value in changes.items():
        (container if key in container or key in _CONTAINER_ARGS else host)[key] = value
    container["host_config"] = host
    return {key: value for key, value in container.items() if value is not None}


_CONTAINER_ARGS = frozenset({"image", "user", "labels", "volumes", "entrypoint", "command",
                             "name", "environment", "working_dir", "ports"})  # fmt: skip


def create(client: docker.DockerClient, kwargs: dict[str, Any]) -> str:
    """Create a container with `sandbox_kwargs`' arguments; its id."""
    kwargs = {**kwargs}
    host = client.api.create_host_config(**{k: v for k, v in kwargs.pop("host_config").items()
                                            if v is not None})  # fmt: skip
    created: dict[str, str] = client.api.create_container(host_config=host, **kwargs)
    return created["Id"]
