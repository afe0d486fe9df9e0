"""The docker backend: the container is locked down, labelled, pooled and cleaned up, and
writes nothing to the host."""

from __future__ import annotations

import contextlib
import socket
import uuid
from collections.abc import Callable
from pathlib import Path

import docker
import pytest
from docker.errors import NotFound
from docker.models.containers import Container
from waiting import wait_until

from taskyard.plumbing.settings import ToolWorkerSettings
from taskyard.sandbox.docker.provider import (
    OWNER_LABEL,
    SESSION_LABEL,
    WORKER_LABEL,
    DockerSandboxProvider,
)
from taskyard.sandbox.docker.spec import IPC_SYSCTLS, ULIMITS
from taskyard.sandbox.provider import KernelSandboxProvider
from tests.sandbox.conftest import left_by_a_worker
from tests.sandbox.crash import crash_a_worker

ProviderFactory = Callable[..., KernelSandboxProvider]
ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 20.0
# Listing containers inspects each: polled faster, it meets one the pool is removing (404).
ENGINE_POLL_S = 0.1


def _containers(client: docker.DockerClient, provider: DockerSandboxProvider) -> list:
    return client.containers.list(all=True, filters={"label": f"{OWNER_LABEL}={provider.owner}"})


@pytest.fixture
def docker_provider(make_docker_provider: ProviderFactory) -> DockerSandboxProvider:
    provider = make_docker_provider()
    assert isinstance(provider, DockerSandboxProvider)
    return provider


def test_root_is_read_only_and_work_dirs_are_writable(
    docker_provider: DockerSandboxProvider,
) -> None:
    code = (
        "import os\n"
        "for path in ('/etc/x', '/opt/taskyard/kernel.py', '/work/f', '/tmp/f'):\n"
        "    try:\n"
        "        open(path, 'w').write('x')\n"
        "        print(path, 'ok')\n"
        "    except OSError as e:\n"
        "        print(path, e.strerror)\n"
        "os.getcwd()"
    )
    result = docker_provider.get("t:fs").run(code, TIMEOUT)
    assert result.stdout.splitlines() == [
        "/etc/x Read-only file system",
        "/opt/taskyard/kernel.py Read-only file system",
        "/work/f ok",
        "/tmp/f ok",
    ]
    assert result.result == "'/work'"


def test_host_loopback_is_not_reachable(docker_provider: DockerSandboxProvider) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        code = (
            "import socket\n"
            "try:\n"
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
            "except OSError as e:\n"
            "    print(type(e).__name__)\n"
        )
        result = docker_provider.get("t:lo").run(code, TIMEOUT)
    assert result.stdout == "ConnectionRefusedError\n"  # its own loopback, not the host's


def test_containers_are_labelled_and_close_all_removes_them(
    docker_client: docker.DockerClient,
    docker_provider: DockerSandboxProvider,
    sandbox_worker_label: str,
) -> None:
    docker_provider.get("t:label").run("1", TIMEOUT)
    docker_provider.get("t:label2").run("1", TIMEOUT)
    containers = _containers(docker_client, docker_provider)
    assert sorted(c.labels[SESSION_LABEL] for c in containers) == ["t:label", "t:label2"]
    assert {c.labels[WORKER_LABEL] for c in containers} == {sandbox_worker_label}
    docker_provider.close_all()
    assert _containers(docker_client, docker_provider) == []


def test_warm_pool_hands_out_started_containers(
    docker_client: docker.DockerClient, make_docker_provider: ProviderFactory
) -> None:
    provider = make_docker_provider(pool_size=2)
    assert isinstance(provider, DockerSandboxProvider)
    wait_until(
        lambda: provider.pool_state().ready == 2,
        "the pool to fill",
        timeout=30,
        every=ENGINE_POLL_S,
    )
    assert len(_containers(docker_client, provider)) == 2
    assert provider.get("t:warm").run("'warm'", TIMEOUT).result == "'warm'"
    # The session took a pooled container (labelled for no session); the pool refills.
    wait_until(
        lambda: len(_containers(docker_client, provider)) == 3,
        "the pool to refill",
        timeout=30,
        every=ENGINE_POLL_S,
    )
    labels = sorted(c.labels[SESSION_LABEL] for c in _containers(docker_client, provider))
    assert labels == ["", "", ""]
    provider.close_all()
    assert _containers(docker_client, provider) == []


def test_reap_idle_removes_idle_containers(
    docker_client: docker.DockerClient, make_docker_provider: ProviderFactory
) -> None:
    provider = make_docker_provider(idle_s=0.0)
    assert isinstance(provider, DockerSandboxProvider)
    provider.get("t:idle").run("gone = 1", TIMEOUT)
    assert provider.reap_idle() == ["t:idle"]
    assert provider.sessions() == []
    assert _containers(docker_client, provider) == []
    assert "NameError" in (provider.get("t:idle").run("gone", TIMEOUT).error or "")


@pytest.mark.parametrize("sessions", [1, 8], ids=["a container each", "fork server"])
def test_a_crashed_workers_containers_end_and_its_restart_removes_them(
    docker_client: docker.DockerClient,
    make_docker_provider: ProviderFactory,
    settings: ToolWorkerSettings,
    sandbox_image: str,
    sessions: int,
) -> None:
    label = f"crash-{uuid.uuid4().hex[:8]}"
    then = "assert p.get('t:idle').run('1', 20).result == '1'\n"
    crash_a_worker("docker", label, then=then, sessions=sessions)
    labelled = {"label": f"{WORKER_LABEL}={label}"}
    containers = 2 if sessions == 1 else 1  # the tenant's two sessions: one host holds both

    def left() -> list[Container]:
        return docker_client.containers.list(all=True, filters=labelled)

    # Every kernel, the busy one too, saw its stdin close and ended with the worker...
    wait_until(
        lambda: [c.status for c in left()] == ["exited"] * containers,
        "the kernels to end",
        timeout=30,
        every=ENGINE_POLL_S,
    )
    # ...and the worker's next start removes them, and any other container of its label.
    stray = _sleeper(docker_client, sandbox_image, label)
    elsewhere = _sleeper(docker_client, sandbox_image, f"{label}-other")
    try:
        relabelled = settings.model_copy(update={"sandbox_worker_label": label})
        provider = make_docker_provider(settings=relabelled)
        assert isinstance(provider, DockerSandboxProvider)
        assert provider.remove_orphans() == containers + 1
        assert left() == []
        elsewhere.reload()
        assert elsewhere.status == "running"  # another worker's: untouched
    finally:
        for container in (stray, elsewhere):
            with contextlib.suppress(NotFound):
                container.remove(force=True)


def _sleeper(client: docker.DockerClient, image: str, label: str) -> Container:
    """A running container under a worker label, as a worker killed mid-cell can leave."""
    return client.containers.run(
        image,
        entrypoint=["sleep", "60"],
        labels=left_by_a_worker({WORKER_LABEL: label}),
        network_mode="none",
        detach=True,
    )


def test_what_a_cell_writes_grows_no_file_on_the_host(
    docker_client: docker.DockerClient, docker_provider: DockerSandboxProvider
) -> None:
    code = (
        "import os, sys\n"
        "chunk = b'x' * (1 << 20)\n"
        "for _ in range(50):\n"
        "    os.write(2, chunk)\n"
        "    os.write(1, chunk)\n"
        "sys.__stderr__.write('y' * (1 << 20))"
    )
    assert docker_provider.get("t:flood").run(code, TIMEOUT).error is None
    (container,) = _containers(docker_client, docker_provider)
    log_path = container.attrs["LogPath"]
    assert container.attrs["HostConfig"]["LogConfig"]["Type"] == "none"
    assert not log_path or Path(log_path).stat().st_size < 4096


def test_container_is_created_locked_down(
    docker_client: docker.DockerClient, docker_provider: DockerSandboxProvider
) -> None:
    docker_provider.get("t:spec").run("1", TIMEOUT)
    (container,) = _containers(docker_client, docker_provider)
    host = container.attrs["HostConfig"]
    assert container.attrs["Config"]["User"] == "65534:65534"
    assert (host["NetworkMode"], host["ReadonlyRootfs"]) == ("none", True)
    assert not host.get("Init")  # the kernel is PID 1: docker-init would expose its stdio
    assert (host["CapDrop"], host["SecurityOpt"]) == (["ALL"], ["no-new-privileges"])
    assert (host["Memory"], host["MemorySwap"]) == (128 << 20, 128 << 20)
    assert (host["PidsLimit"], host["NanoCpus"]) == (64, 1_000_000_000)
    assert sorted(host["Tmpfs"]) == ["/tmp", "/work"]
    assert "size=64m" in host["Tmpfs"]["/work"] and host["ShmSize"] == 64 << 20
    assert host["LogConfig"]["Type"] == "none"
    assert container.attrs["Mounts"] == []  # no volume: nothing on the host's disk
    assert (host["IpcMode"], host["Sysctls"]) == ("private", IPC_SYSCTLS)
    assert {u["Name"]: (u["Soft"], u["Hard"]) for u in host["Ulimits"]} == {
        name: (n, n) for name, n in ULIMITS.items()
    }
