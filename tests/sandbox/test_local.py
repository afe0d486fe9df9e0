"""The local backend: namespaces, seccomp and cgroups, a loud warning of what it does not
enforce, and the launcher's own words when it cannot start."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from taskyard.plumbing.settings import ToolWorkerSettings
from taskyard.sandbox.errors import SandboxUnavailable
from taskyard.sandbox.local.cgroups import CgroupLimits, find_cgroups
from taskyard.sandbox.local.kernel_copy import KernelCopy
from taskyard.sandbox.local.launchers import LaunchSpec, bwrap, parse_size
from taskyard.sandbox.local.provider import LocalChannel, LocalSandboxProvider
from taskyard.sandbox.provider import KernelSandboxProvider
from tests.sandbox.crash import crash_a_worker

ProviderFactory = Callable[..., KernelSandboxProvider]
ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 20.0


def test_warns_that_isolation_is_weaker(
    make_local_provider: ProviderFactory, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="taskyard.sandbox.local.provider"):
        make_local_provider()
    assert any("WEAKER isolation" in r.getMessage() for r in caplog.records)


def test_bwrap_file_system_is_read_only_but_its_sized_tmpfs(
    make_local_provider: ProviderFactory, settings: ToolWorkerSettings
) -> None:
    code = (
        "import os\n"
        "for path in ('/x', '/dev/x', '/usr/x', '/work/f', '/tmp/f', '/dev/shm/f'):\n"
        "    try:\n"
        "        open(path, 'w').write('x')\n"
        "        print(path, 'ok')\n"
        "    except OSError as e:\n"
        "        print(path, e.strerror)\n"
        "try:\n"
        "    open('/dev/shm/big', 'wb').write(b'x' * (2 << 20))\n"
        "except OSError as e:\n"
        "    print('/dev/shm/big', e.strerror)\n"
        "os.path.exists('/root'), os.path.exists('/etc/passwd'), os.getcwd()"
    )
    small = settings.model_copy(update={"sandbox_disk": "1m"})
    result = make_local_provider(settings=small, launcher="bwrap").get("t:fs").run(code, TIMEOUT)
    assert result.stdout.splitlines() == [
        "/x Read-only file system",
        "/dev/x Read-only file system",
        "/usr/x Read-only file system",
        "/work/f ok",
        "/tmp/f ok",
        "/dev/shm/f ok",
        "/dev/shm/big No space left on device",
    ]
    assert result.result == "(False, False, '/work')"


def test_without_writable_cgroups_it_says_so_and_caps_each_process(
    make_local_provider: ProviderFactory,
    settings: ToolWorkerSettings,
    caplog: pytest.LogCaptureFixture,
) -> None:
    elsewhere = settings.model_copy(update={"sandbox_cgroup_parent": "/taskyard-no-such-cgroup"})
    with caplog.at_level(logging.WARNING, logger="taskyard.sandbox.local.provider"):
        sandbox = make_local_provider(settings=elsewhere).get("t:rlimit")
    warning = " ".join(r.getMessage() for r in caplog.records)
    assert "no per-sandbox memory, process or CPU limit" in warning
    sandbox.run("kept = 1", TIMEOUT)
    result = sandbox.run("blob = bytearray(512 * 1024 * 1024)", TIMEOUT)  # limit is 128m
    assert "MemoryError" in (result.error or "")
    assert sandbox.run("kept", TIMEOUT).result == "1"


def test_missing_launcher_is_unavailable(settings: ToolWorkerSettings) -> None:
    with pytest.raises(SandboxUnavailable, match="no sandbox launcher"):
        LocalSandboxProvider(settings, launcher="chroot")


def test_check_reports_the_launchers_own_words(make_local_provider: ProviderFactory) -> None:
    provider = make_local_provider(python="/nonexistent/python3")
    with pytest.raises(SandboxUnavailable) as failed:
        provider.check()
    message = str(failed.value)
    assert "bwrap could not start the kernel" in message
    assert "/nonexistent/python3" in message and "No such file or directory" in message


@pytest.fixture(scope="module")
def kernel_copy() -> Iterator[KernelCopy]:
    """The kernel where uid 65534 reads it, as the local backend puts it."""
    copy = KernelCopy()
    yield copy
    copy.remove()


def _bwrap_in_docker(copy: KernelCopy, image: str, label: str, *security: str) -> LocalChannel:
    """The local backend's bwrap command line, run inside a Docker container (the host's /usr
    and the kernel bound in) with the given security options: a CI job's set-up."""
    home = copy.home
    spec = LaunchSpec(
        python="/usr/bin/python3", kernel_home=home, memory=128 << 20, disk=64 << 20, as_root=False
    )
    argv, env = bwrap(spec)
    volumes = ["-v", "/usr:/usr:ro", "-v", f"{home}:{home}:ro"]
    docker = ["docker", "run", "-i", "--rm", "--network", "none", "--user", "65534:65534"]
    docker += ["--label", f"taskyard.worker={label}", *volumes, *security]
    docker += ["--entrypoint", argv[0], image, *argv[1:]]
    return LocalChannel.start(docker, env, launcher="bwrap")


@pytest.mark.parametrize(
    ("security", "said", "hint"),
    [
        (["seccomp=unconfined"], "Can't mount proc", "systempaths=unconfined"),
        ([], "No permissions to create new namespace", "seccomp=unconfined"),
    ],
)
def test_bwrap_inside_docker_says_why_it_cannot_start(
    kernel_copy: KernelCopy,
    sandbox_image: str,
    sandbox_worker_label: str,
    security: list[str],
    said: str,
    hint: str,
) -> None:
    options = [arg for option in security for arg in ("--security-opt", option)]
    with pytest.raises(SandboxUnavailable) as failed:
        _bwrap_in_docker(kernel_copy, sandbox_image, sandbox_worker_label, *options)
    assert said in str(failed.value) and hint in str(failed.value)


def test_bwrap_inside_docker_runs_once_allowed(
    kernel_copy: KernelCopy, sandbox_image: str, sandbox_worker_label: str
) -> None:
    # The same command line as above: only the container's options differ.
    options = ["seccomp=unconfined", "systempaths=unconfined"]
    security = [arg for option in options for arg in ("--security-opt", option)]
    channel = _bwrap_in_docker(kernel_copy, sandbox_image, sandbox_worker_label, *security)
    try:
        channel.send({"id": 1, "nonce": "n", "code": "6 * 7"}, time.monotonic() + TIMEOUT)
        assert (channel.receive(time.monotonic() + TIMEOUT) or {}).get("result") == "42"
    finally:
        channel.close()


def test_a_crashed_workers_cgroups_are_removed_at_restart(
    make_local_provider: ProviderFactory, settings: ToolWorkerSettings
) -> None:
    tree, why_not = find_cgroups()
    assert tree is not None, f"this test needs writable cgroups, as `make test` has: {why_not}"
    label = f"crash-{uuid.uuid4().hex[:8]}"
    crash_a_worker("local", label)

    def left() -> list[Path]:
        return [p for parent in tree.parents.values() for p in parent.glob(f"taskyard-{label}*")]

    assert left()  # the cgroup stayed behind...
    deadline = time.monotonic() + 10
    while any((d / "cgroup.procs").read_text().strip() for d in left()):
        assert time.monotonic() < deadline, "the sandbox outlived its worker"
        time.sleep(0.05)  # ...but the kernel saw its stdin close and ended, mid-cell or not
    # Another worker's, whose label merely starts with this one: not ours to remove.
    others = f"taskyard-{label}-b-{uuid.uuid4().hex[:12]}-1"
    other = tree.create(others, CgroupLimits(1 << 24, 4, 1))
    try:
        relabelled = settings.model_copy(update={"sandbox_worker_label": label})
        assert make_local_provider(settings=relabelled).remove_orphans() == 1
        assert {p.name for p in left()} == {others}
    finally:
        other.remove()


@pytest.mark.parametrize(
    ("text", "size"), [("64m", 64 << 20), ("1g", 1 << 30), ("512", 512), ("1.5k", 1536)]
)
def test_parse_size(text: str, size: int) -> None:
    assert parse_size(text) == size


_FROM_PRIVATE_CHECKOUT = """
import sys
from taskyard.sandbox.local.provider import LocalSandboxProvider
from taskyard.plumbing.settings import ToolWorkerSettings
provider = LocalSandboxProvider(ToolWorkerSettings(), launcher=sys.argv[1])
try:
    result = provider.get("t:private").run("import os; os.getuid(), 6 * 7", 20.0)
    print(result.result, result.error)
finally:
    provider.close_all()
print("kernel copy left:", provider._kernel.home.exists())
"""


@pytest.mark.parametrize("launcher", ["bwrap", "unshare"])
def test_a_checkout_under_a_private_directory_still_sandboxes(
    tmp_path: Path, launcher: str
) -> None:
    # /root on a fresh Debian and every `mktemp -d` are 0700: uid 65534 cannot enter them.
    private = tmp_path / "home"
    private.mkdir(mode=0o700)
    shutil.copytree(ROOT / "shared", private / "checkout/shared", ignore=_pycache)
    result = subprocess.run(
        [sys.executable, "-c", _FROM_PRIVATE_CHECKOUT, launcher],
        cwd=private / "checkout",
        env={**os.environ, "PYTHONPATH": str(private / "checkout/shared")},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines() == ["(65534, 42) None", "kernel copy left: False"]


def _pycache(_: str, names: list[str]) -> list[str]:
    return [n for n in names if n == "__pycache__"]
