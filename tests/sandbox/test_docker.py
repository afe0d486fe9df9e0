"""The docker backend: the container is locked down, labelled, pooled and cleaned up."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import docker
import pytest

from shared.sandbox.docker import OWNER_LABEL, SESSION_LABEL, DockerSandboxProvider
from shared.sandbox.provider import KernelSandboxProvider

ProviderFactory = Callable[..., KernelSandboxProvider]
ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 20.0


def _containers(client: docker.DockerClient, provider: DockerSandboxProvider) -> list:
    return client.containers.list(all=True, filters={"label": f"{OWNER_LABEL}={provider.owner}"})


def _wait_for(condition: Callable[[], bool], what: str, limit_s: float = 30.0) -> None:
    deadline = time.monotonic() + limit_s
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.1)


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


def test_limits_hold(docker_provider: DockerSandboxProvider) -> None:
    sandbox = docker_provider.get("t:limits")
    forks = sandbox.run(
        "import os\nn = 0\ntry:\n    while n < 500:\n        if os.fork() == 0:\n"
        "            import time; time.sleep(30)\n        n += 1\n"
        "except OSError as e:\n    print(e.strerror)\nn < 500",
        TIMEOUT,
    )
    assert forks.stdout == "Resource temporarily unavailable\n" and forks.result == "True"
    oom = sandbox.run("blob = bytearray(512 * 1024 * 1024)", TIMEOUT)
    assert oom.state_lost and "out of memory" in (oom.error or "")
    assert sandbox.run("1 + 1", TIMEOUT).result == "2"


def test_containers_are_labelled_and_close_all_removes_them(
    docker_client: docker.DockerClient, docker_provider: DockerSandboxProvider
) -> None:
    docker_provider.get("t:label").run("1", TIMEOUT)
    docker_provider.get("t:label2").run("1", TIMEOUT)
    labels = sorted(c.labels[SESSION_LABEL] for c in _containers(docker_client, docker_provider))
    assert labels == ["t:label", "t:label2"]
    docker_provider.close_all()
    assert _containers(docker_client, docker_provider) == []


def test_warm_pool_hands_out_started_containers(
    docker_client: docker.DockerClient, make_docker_provider: ProviderFactory
) -> None:
    provider = make_docker_provider(pool_size=2)
    assert isinstance(provider, DockerSandboxProvider)
    _wait_for(lambda: len(_containers(docker_client, provider)) == 2, "the pool to fill")
    assert provider.get("t:warm").run("'warm'", TIMEOUT).result == "'warm'"
    # The session took a pooled container (labelled for no session); the pool refills.
    _wait_for(lambda: len(_containers(docker_client, provider)) == 3, "the pool to refill")
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


def test_crashed_worker_leaves_nothing_running(
    docker_client: docker.DockerClient, make_docker_provider: ProviderFactory
) -> None:
    crash = (
        "import os\n"
        "from shared.sandbox.docker import DockerSandboxProvider\n"
        "p = DockerSandboxProvider(pool_size=1)\n"
        "assert p.get('t:crash').run('1', 20).result == '1'\n"
        "print(p.owner, flush=True)\n"
        "os._exit(9)\n"
    )
    worker = subprocess.run(
        [sys.executable, "-c", crash], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert worker.returncode == 9, worker.stderr
    owned = {"label": f"{OWNER_LABEL}={worker.stdout.strip()}"}
    # The kernels saw their stdin close and exited with the worker...
    _wait_for(
        lambda: all(
            c.status == "exited" for c in docker_client.containers.list(all=True, filters=owned)
        ),
        "the orphaned kernels to exit",
    )
    # ...and the next provider clears them away.
    make_docker_provider()
    assert docker_client.containers.list(all=True, filters=owned) == []


def test_container_is_created_locked_down(
    docker_client: docker.DockerClient, docker_provider: DockerSandboxProvider
) -> None:
    docker_provider.get("t:spec").run("1", TIMEOUT)
    (container,) = _containers(docker_client, docker_provider)
    host = container.attrs["HostConfig"]
    assert container.attrs["Config"]["User"] == "65534:65534"
    assert (host["NetworkMode"], host["ReadonlyRootfs"], host["Init"]) == ("none", True, True)
    assert (host["CapDrop"], host["SecurityOpt"]) == (["ALL"], ["no-new-privileges"])
    assert (host["Memory"], host["MemorySwap"]) == (128 << 20, 128 << 20)
    assert (host["PidsLimit"], host["NanoCpus"]) == (64, 1_000_000_000)
    assert sorted(host["Tmpfs"]) == ["/tmp", "/work"]
    assert "size=64m" in host["Tmpfs"]["/work"]
