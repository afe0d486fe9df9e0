"""How every sandbox container is made (`ContainerSpec`): no network, a read-only root with
small tmpfs mounts, no capabilities, its own IPC namespace emptied, no log driver, and the
process limits the engine's OCI runtime can hold.

`TASKYARD_SANDBOX_RUNTIME` picks that runtime: runc, or gVisor's runsc, whose own kernel (the
Sentry) answers the cells' system calls. A runtime the engine lacks is refused with how to add
it (`missing_runtime`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import docker
from docker.errors import APIError, DockerException
from docker.types import LogConfig, Ulimit
from docker.utils import parse_bytes

from taskyard.plumbing.settings import SandboxSettings
from taskyard.sandbox.kernel.seccomp import DENIED

__all__ = [
    "GVISOR",
    "IPC_SYSCTLS",
    "ULIMITS",
    "ContainerSpec",
    "create_failed",
    "fork_server_profile",
    "missing_runtime",
    "runtimes",
]

GVISOR = "runsc"
_GVISOR_HOST_PIDS, _GVISOR_HOST_PIDS_PER_TASK = 64, 8

# The container's own IPC namespace holds no System V IPC object and no POSIX message queue
# (the kernel's seccomp filter refuses their calls too; these also close /dev/mqueue, which
# a plain open() reaches). Only these sysctls are per IPC namespace, so settable here.
IPC_SYSCTLS = {
    "kernel.shmmni": "0",
    "kernel.shmall": "0",
    "kernel.shmmax": "0",
    "kernel.msgmni": "0",
    "kernel.sem": "0 0 0 0",
    "fs.mqueue.queues_max": "0",
}
# Per process: no message queue bytes, and as many open files as the local backend allows
# (else the engine's own limit applies, 20,000 here: each fd is kernel memory).
ULIMITS = {"msgqueue": 0, "nofile": 256}
# What a fork server needs of the calls the kernel's filter denies: making each session's
# namespaces (unshare) and its private tmpfs mounts (mount). The cells never get them: each
# session's executor installs the kernel's filter, which denies both, before its first cell.
FORK_SERVER_NEEDS = frozenset({"unshare", "mount"})
_HOST_PIDS = 16  # the supervisor, the fork server and a session being forked


def fork_server_profile() -> str:
    """The seccomp profile of a fork-server container, as the engine takes it (JSON): every
    call the kernel's own filter denies, but those the fork server needs, fails with EPERM;
    Docker's default profile would refuse unshare and mount to a container without
    CAP_SYS_ADMIN, which it does not get."""
    denied = sorted(set(DENIED) - FORK_SERVER_NEEDS)
    return json.dumps({
        "defaultAction": "SCMP_ACT_ALLOW",
        "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32",
                          "SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM"],
        "syscalls": [{"names": denied, "action": "SCMP_ACT_ERRNO", "errnoRet": 1}],
    })  # fmt: skip


@dataclass(frozen=True)
class ContainerSpec:
    """How every sandbox container is made: image and limits (and, for tests, a command run
    instead of the image's kernel)."""

    image: str
    memory: str = "256m"
    pids: int = 64
    cpus: float = 1.0
    disk: str = "64m"
    runtime: str = "runc"  # the engine's OCI runtime: "runsc" for gVisor
    lease_s: float = 10.0  # a kernel whose worker is silent this long ends
    command: tuple[str, ...] = ()
    # Sessions per container: above 1, a fork server's (memory, pids and disk are each one
    # session's share).
    sessions: int = 1

    @classmethod
    def from_settings(cls, settings: SandboxSettings) -> ContainerSpec:
        return cls(
            image=settings.sandbox_image,
            memory=settings.sandbox_memory,
            pids=settings.sandbox_pids,
            cpus=settings.sandbox_cpus,
            disk=settings.sandbox_disk,
            runtime=settings.sandbox_runtime,
            lease_s=settings.tool_worker_dead_s,
            sessions=_sessions(settings),
        )

    def create(self, api: docker.APIClient, labels: dict[str, str]) -> str:
        """Create a container, no network and nothing writable but its tmpfs; its id."""
        # Owned by the sandbox user: the engine copies the image directory's mode, not `mode=`.
        tmpfs = f"rw,nosuid,nodev,size={self.disk},uid=65534,gid=65534"
        memory = int(parse_bytes(self.memory)) * self.sessions
        host_config = api.create_host_config(
            network_mode="none",
            read_only=True,
            tmpfs={"/work": tmpfs, "/tmp": tmpfs},
            shm_size=self.disk,
            mem_limit=memory,
            memswap_limit=memory,  # no swap: the memory limit is the limit
            nano_cpus=int(self.cpus * 1e9),
            cap_drop=["ALL"],
            security_opt=self._security(),
            ipc_mode="private",  # its own IPC namespace, which no other container may join
            sysctls=IPC_SYSCTLS,
            log_config=LogConfig(type=LogConfig.types.NONE),  # no host file grows
            runtime=self.runtime,
            **self._process_limits(),
        )
        created = api.create_container(
            self.image,
            entrypoint=list(self.command) or None,
            command=self._fork_server_arguments(),
            stdin_open=True,
            # No StdinOnce: closing our socket leaves the kernel running, so that another
            # worker can take it over (a hand-off); the lease ends it once nobody renews it.
            detach=True,
            tty=False,
            user="65534:65534",
            working_dir="/work",
            labels=labels,
            host_config=host_config,
        )
        container_id: str = created["Id"]
        return container_id

    @property
    def forks(self) -> bool:
        """Whether containers hold many sessions, each forked by a fork server."""
        return self.sessions > 1

    def _security(self) -> list[str]:
        if not self.forks:
            return ["no-new-privileges"]
        return ["no-new-privileges", f"seccomp={fork_server_profile()}"]

    def _fork_server_arguments(self) -> list[str] | None:
        if not self.forks or self.command:
            return None
        share = {"--memory": int(parse_bytes(self.memory)), "--pids": self.pids,
                 "--disk": int(parse_bytes(self.disk))}  # fmt: skip
        return ["--sessions", *(str(word) for pair in share.items() for word in pair)]

    @property
    def gvisor(self) -> bool:
        """Whether the runtime is gVisor's: "runsc", or a variant registered as "runsc-..."."""
        return self.runtime == GVISOR or self.runtime.startswith(f"{GVISOR}-")

    def _process_limits(self) -> dict[str, Any]:
        """The limits on processes and threads (and on each process's files and message
        queue bytes), as the runtime can hold them.

        runc: the container's pids cgroup. runsc: that cgroup counts gVisor's own host threads
        too (about 50 idle, 4-8 more per task of the sandbox, measured), so the sandbox's tasks
        are counted by gVisor's kernel (RLIMIT_NPROC: there it sees this sandbox's tasks
        alone, threads included), and the cgroup is a backstop sized for that many.
        """
        ulimits = [Ulimit(name=name, soft=n, hard=n) for name, n in ULIMITS.items()]
        if self.forks:
            # Each session's own limits are rlimits (`kernel/isolation.py`); the supervisor
            # holds two descriptors per session (its socket, its /work).
            files = ULIMITS["nofile"] + 2 * self.sessions
            ulimits = [*ulimits[:-1], Ulimit(name="nofile", soft=files, hard=files)]
            return {"pids_limit": self.pids * self.sessions + _HOST_PIDS, "ulimits": ulimits}
        if not self.gvisor:
            return {"pids_limit": self.pids, "ulimits": ulimits}
        nproc = Ulimit(name="nproc", soft=self.pids, hard=self.pids)
        host_pids = _GVISOR_HOST_PIDS + _GVISOR_HOST_PIDS_PER_TASK * self.pids
        return {"pids_limit": host_pids, "ulimits": [*ulimits, nproc]}


def _sessions(settings: SandboxSettings) -> int:
    """gVisor refuses mounts in a user namespace, so its sessions could not have file systems
    of their own: one container per session there."""
    runtime = settings.sandbox_runtime
    if runtime == GVISOR or runtime.startswith(f"{GVISOR}-"):
        return 1
    return settings.sandbox_sessions_per_container


def create_failed(api: docker.APIClient, spec: ContainerSpec, exc: DockerException) -> str:
    """Why a container could not be made: for a runtime the engine lacks, how to add it."""
    if isinstance(exc, APIError) and "runtime" in str(exc.explanation or "").lower():
        try:
            return missing_runtime(spec.runtime, runtimes(api))
        except DockerException:
            pass  # the engine's own words, below
    return f"cannot create a sandbox from {spec.image!r}: {exc}"


def runtimes(api: docker.APIClient) -> list[str]:
    """The OCI runtimes the engine has, by name."""
    return sorted(api.info().get("Runtimes") or {})


def missing_runtime(runtime: str, known: list[str]) -> str:
    """The refusal of a runtime the engine lacks: the ones it has, and how to add gVisor."""
    said = f"the Docker engine has no runtime {runtime!r} (TASKYARD_SANDBOX_RUNTIME); it has "
    said += ", ".join(known) or "none"
    if runtime.startswith(GVISOR):
        said += (
            ". Install gVisor (Debian: apt-get install runsc) and register it with the engine: "
            "scripts/setup_docker.sh does both (`runsc install -- --network=none` writes "
            "/etc/docker/daemon.json, then SIGHUP to dockerd)"
        )
    return said
