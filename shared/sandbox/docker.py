"""The docker backend: one locked-down container per session, running the kernel.

The worker talks to the kernel over the container's stdin/stdout through the Docker API's
attach socket, so the container needs no network at all. Why the attach socket and not a
`docker run -i` subprocess per session: it is one socket to the local engine instead of one
CLI process (tens of MB) per session, the same client creates, stops and inspects the
container, and the multiplexed stream is only an 8-byte header per frame to strip.

The kernel's supervisor is the container's PID 1 (no docker-init: its dumpable PID 1 would
hold the container's stdio where a cell could open it through /proc/1/fd). The container has
no log driver, so nothing a sandbox writes grows a file on the host; stderr (only the kernel's
own messages reach it) is read from the attach stream, keeping its last few KB.

`TASKYARD_SANDBOX_RUNTIME` picks the engine's OCI runtime: runc, or gVisor's runsc, whose own
kernel (the Sentry) answers the cells' system calls; `check` refuses one the engine lacks.

Containers carry the labels ``taskyard.worker`` (`settings.sandbox_worker_label`),
``taskyard.node`` (the tool worker's Celery node name), ``taskyard.owner`` (one id per
provider) and ``taskyard.session`` (the session key, or "" for a warm-pool container). The
container's stdin outlives the worker's socket (so that a planned exit can hand the kernel to
another worker, `hand_off`), so the worker renews a lease on each kernel it holds: one whose
worker is silent `TOOL_WORKER_DEAD_S` ends, mid-cell too. A restarted worker removes every
container left under its label and node name (`remove_orphans`) but those handed off.
"""

from __future__ import annotations

import logging
import socket
import struct
import threading
import time
import uuid
import weakref
from dataclasses import dataclass
from typing import Any

import docker
import requests
from docker.errors import APIError, DockerException, NotFound
from docker.types import LogConfig, Ulimit

from shared.sandbox.channel import (
    OutputTail,
    ReplyLines,
    describe_exit,
    encode_line,
    wait_readable,
    write_within,
)
from shared.sandbox.demand import PoolBounds, pool_bounds
from shared.sandbox.errors import KernelGone, SandboxError, SandboxUnavailable
from shared.sandbox.provider import KernelSandboxProvider, SandboxLimits
from shared.settings import SandboxSettings, get_settings

__all__ = [
    "HANDOFF_PREFIX",
    "NODE_LABEL",
    "NO_NODE",
    "OWNER_LABEL",
    "SESSION_LABEL",
    "WORKER_LABEL",
    "ContainerSpec",
    "DockerChannel",
    "DockerSandboxProvider",
]

SESSION_LABEL = "taskyard.session"
OWNER_LABEL = "taskyard.owner"
WORKER_LABEL = "taskyard.worker"
NODE_LABEL = "taskyard.node"
NO_NODE = "-"  # a provider outside a Celery worker (tests, a library user)
START_TIMEOUT_S = 30.0
GVISOR = "runsc"
HANDOFF_PREFIX = "taskyard-handoff-"  # the name of a container handed to another worker
_GVISOR_HOST_PIDS, _GVISOR_HOST_PIDS_PER_TASK = 64, 8
_RENEW_WRITE_S = 2.0  # a lease line a kernel does not take in this long: it is stuck or gone

log = logging.getLogger(__name__)
_FRAME_HEADER = struct.Struct(">BxxxL")  # stream (1 stdout, 2 stderr), padding, payload size
_STDOUT, _STDERR = 1, 2
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
        )

    def create(self, api: docker.APIClient, labels: dict[str, str]) -> str:
        """Create a container, no network and nothing writable but its tmpfs; its id."""
        # Owned by the sandbox user: the engine copies the image directory's mode, not `mode=`.
        tmpfs = f"rw,nosuid,nodev,size={self.disk},uid=65534,gid=65534"
        host_config = api.create_host_config(
            network_mode="none",
            read_only=True,
            tmpfs={"/work": tmpfs, "/tmp": tmpfs},
            shm_size=self.disk,
            mem_limit=self.memory,
            memswap_limit=self.memory,  # no swap: the memory limit is the limit
            nano_cpus=int(self.cpus * 1e9),
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            ipc_mode="private",  # its own IPC namespace, which no other container may join
            sysctls=IPC_SYSCTLS,
            log_config=LogConfig(type=LogConfig.types.NONE),  # no host file grows
            runtime=self.runtime,
            **self._process_limits(),
        )
        created = api.create_container(
            self.image,
            entrypoint=list(self.command) or None,
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
        if not self.gvisor:
            return {"pids_limit": self.pids, "ulimits": ulimits}
        nproc = Ulimit(name="nproc", soft=self.pids, hard=self.pids)
        host_pids = _GVISOR_HOST_PIDS + _GVISOR_HOST_PIDS_PER_TASK * self.pids
        return {"pids_limit": host_pids, "ulimits": [*ulimits, nproc]}


class _Demux:
    """Splits the attach stream's frames: stdout into reply lines, stderr into a short tail."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._raw = bytearray()
        self.lines = ReplyLines()
        self.stderr = OutputTail()
        self.eof = False

    def read(self, deadline: float) -> dict[str, Any] | None:
        """The next reply, or None at `deadline`; raises `KernelGone` at EOF."""
        while (reply := self.lines.pop()) is None:
            if self.eof:  # with the kernel's last words: the engine may be slow to say more
                said = self.stderr.last_line()
                raise KernelGone("the container's output ended" + (f"; {said}" if said else ""))
            if not self.pump(deadline):
                return None
        return reply

    def pump(self, deadline: float) -> bool:
        """Read what arrives before `deadline`; False if nothing did."""
        if not wait_readable(self._sock.fileno(), deadline):
            return False
        try:
            chunk = self._sock.recv(1 << 16)
        except BlockingIOError:
            return True  # woken with nothing to read after all
        except OSError:
            chunk = b""
        self.eof = not chunk
        self._raw += chunk
        self._split_frames()
        return True

    def _split_frames(self) -> None:
        while len(self._raw) >= _FRAME_HEADER.size:
            stream, size = _FRAME_HEADER.unpack_from(self._raw)
            end = _FRAME_HEADER.size + size
            if len(self._raw) < end:
                return
            payload = bytes(self._raw[_FRAME_HEADER.size : end])
            del self._raw[:end]
            if stream == _STDOUT:
                self.lines.feed(payload)
            elif stream == _STDERR:
                self.stderr.feed(payload)


class DockerChannel:
    """A `KernelChannel` to the kernel running in one container."""

    def __init__(self, api: docker.APIClient, container: str, sock: socket.socket, memory: str):
        self._api = api
        self._container = container
        self._sock = sock
        self._memory = memory
        self._demux = _Demux(sock)
        self._send_lock = threading.Lock()
        self._broken = False  # a request was left half written
        self._closed = False
        sock.setblocking(False)  # requests are written within a deadline

    @classmethod
    def start(
        cls, api: docker.APIClient, spec: ContainerSpec, labels: dict[str, str]
    ) -> DockerChannel:
        """Create, attach and start a container, and wait for the kernel's ready line."""
        try:
            container = spec.create(api, labels)
        except DockerException as exc:
            raise SandboxUnavailable(_create_failed(api, spec, exc)) from exc
        channel: DockerChannel | None = None
        try:
            # Attached before the start, so not a byte of output is missed.
            raw = api.attach_socket(
                container, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
            )
            api.start(container)
            channel = cls(api, container, getattr(raw, "_sock", raw), spec.memory)
            channel.renew(spec.lease_s)  # read once it is ready; from now on it needs us
            channel.wait_ready(START_TIMEOUT_S)
        except (DockerException, KernelGone) as exc:
            said = channel.stderr() if channel is not None else ""
            api.remove_container(container, force=True)
            detail = f"; it said: {said}" if said else ""
            raise SandboxUnavailable(f"the sandbox kernel did not start: {exc}{detail}") from exc
        return channel

    @classmethod
    def attach(cls, api: docker.APIClient, container: str, memory: str) -> DockerChannel:
        """A channel to a kernel already running in `container` (handed off by another
        worker): its output from now on."""
        raw = api.attach_socket(
            container, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
        )
        return cls(api, container, getattr(raw, "_sock", raw), memory)

    @property
    def container(self) -> str:
        return self._container

    def renew(self, lease_s: float) -> None:
        """Vouch for this worker `lease_s` longer (`kernel/__init__.py`). Skipped while a
        request is being sent (the kernel counts that line too) or once closed."""
        if self._closed or not self._send_lock.acquire(blocking=False):
            return
        try:
            if not self._broken:
                deadline = time.monotonic() + _RENEW_WRITE_S
                write_within(self._sock.fileno(), encode_line({"lease": lease_s}), deadline)
        except SandboxError:
            self._broken = True  # half a line may be out: the next call finds the kernel gone
        finally:
            self._send_lock.release()

    def detach(self, lease_s: float) -> str:
        """Leave the kernel running for another worker to attach to within `lease_s`, and
        close only our socket; the container's id. Raises `KernelGone` if it cannot."""
        self.send({"lease": lease_s}, time.monotonic() + _RENEW_WRITE_S)
        self._closed = True
        self._sock.close()
        return self._container

    def wait_ready(self, timeout: float) -> None:
        reply = self._demux.read(time.monotonic() + timeout)
        if not (reply or {}).get("ready"):
            raise KernelGone(f"no ready line within {timeout:g}s (got {reply!r})")

    def send(self, message: dict[str, Any], deadline: float) -> None:
        with self._send_lock:
            if self._broken:
                raise KernelGone("a request to the kernel was left half written")
            try:
                write_within(self._sock.fileno(), encode_line(message), deadline)
            except KernelGone:
                self._broken = True
                raise

    def receive(self, deadline: float) -> dict[str, Any] | None:
        return self._demux.read(deadline)

    def alive(self) -> bool:
        try:
            while not self._closed and not self._demux.eof and self._demux.pump(0.0):
                pass  # drain what is pending; a closed stream means the container ended
        except KernelGone:
            return False  # closed meanwhile
        return not (self._closed or self._demux.eof or self._broken)

    def stderr(self) -> str:
        return self._demux.stderr.text()

    def exit_reason(self) -> str:
        try:
            self._api.wait(self._container, timeout=2)
            state = self._api.inspect_container(self._container)["State"]
        except (DockerException, requests.RequestException):
            return ""
        if state.get("OOMKilled"):
            return f"out of memory: the sandbox's limit is {self._memory}"
        if state.get("Running"):
            return ""
        said = self._demux.stderr.last_line()
        return describe_exit(state.get("ExitCode")) + (f"; {said}" if said else "")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._sock.close()
        try:
            self._api.remove_container(self._container, force=True)
        except NotFound:
            pass  # already gone: that is the goal
        except (DockerException, requests.RequestException):
            # Closing must not fail a call; the labels let an operator find what is left.
            log.warning("could not remove sandbox container %s", self._container, exc_info=True)


class DockerSandboxProvider(KernelSandboxProvider):
    """The production `SandboxProvider`: one container per session, from the sandbox image.

    Limits come from settings unless given: `spec` overrides image and limits, `client` the
    engine connection (tests hand in their own).
    """

    def __init__(
        self,
        settings: SandboxSettings | None = None,
        *,
        spec: ContainerSpec | None = None,
        client: docker.DockerClient | None = None,
        pool_size: int | None = None,
        pool: PoolBounds | None = None,
        idle_s: float | None = None,
        limits: SandboxLimits | None = None,
        node: str = NO_NODE,
    ) -> None:
        settings = settings or get_settings(SandboxSettings)
        self._spec = spec or ContainerSpec.from_settings(settings)
        self._client = client or _connect()
        self.owner = uuid.uuid4().hex[:12]
        self.worker_label = settings.sandbox_worker_label
        self.node = node
        self._engine: str | None = None
        self._leases = _Leases(self._spec.lease_s, settings.tool_worker_beat_s)
        super().__init__(
            self._start_kernel,
            pool=pool or pool_bounds(settings, pool_size),
            idle_s=settings.sandbox_idle_s if idle_s is None else idle_s,
            limits=limits or SandboxLimits.from_settings(settings),
            interrupt_grace_s=settings.sandbox_interrupt_grace_s,
        )

    def _start_kernel(self, session_key: str | None) -> DockerChannel:
        labels = {
            WORKER_LABEL: self.worker_label,
            NODE_LABEL: self.node,
            OWNER_LABEL: self.owner,
            SESSION_LABEL: session_key or "",
        }
        return self._leases.keep(DockerChannel.start(self._client.api, self._spec, labels))

    @property
    def place(self) -> str:
        """This worker's Docker engine (its ID): another worker on it can take a kernel over."""
        if self._engine is None:
            self._engine = f"docker:{self._client.info()['ID']}"
        return self._engine

    def hand_off(self, lease_s: float) -> dict[str, str]:
        """See `KernelSandboxProvider.hand_off`: each container keeps running, renamed
        ``taskyard-handoff-...`` so that its maker's next start leaves it; the handle is the
        engine and the container ("docker:<engine id>/<container id>")."""
        handles = {}
        for key, channel in self._detach_idle().items():
            assert isinstance(channel, DockerChannel)
            try:
                container = channel.detach(lease_s)
            except KernelGone:
                channel.close()  # it died meanwhile: nothing to hand over
                continue
            self._mark_handed(container)
            handles[key] = f"{self.place}/{container}"
        return handles

    def take_over(self, session_key: str, handle: str) -> None:
        """See `KernelSandboxProvider.take_over`: attach to the handed-off container."""
        place, _, container = handle.rpartition("/")
        if place != self.place:
            raise SandboxUnavailable(
                "its sandbox runs on another Docker engine; no worker there took it over"
            )
        try:
            state = self._client.api.inspect_container(container)["State"]
            if not state.get("Running"):
                raise SandboxUnavailable("its sandbox's container had ended")
            channel = self._leases.keep(
                DockerChannel.attach(self._client.api, container, self._spec.memory)
            )
            # From now on the kernel lives on this worker's lease, not the hand-off's longer
            # one: should this worker die too, it ends as its own kernels do.
            channel.renew(self._spec.lease_s)
        except NotFound:
            raise SandboxUnavailable("its sandbox's container is gone") from None
        except (DockerException, requests.RequestException) as exc:
            raise SandboxUnavailable(f"could not attach to its sandbox: {exc}") from exc
        try:
            self._attach(session_key, channel)
        except SandboxError:
            channel.close()
            raise

    def _mark_handed(self, container: str) -> None:
        try:
            self._client.api.rename(container, f"{HANDOFF_PREFIX}{container[:12]}")
        except DockerException:
            log.warning("could not mark %s as handed off; a restart may remove it", container)

    def check(self) -> None:
        """What `KernelSandboxProvider.check` does, under the configured runtime: a runtime
        the engine does not have is refused first, naming those it has and how to add it."""
        runtime = self._spec.runtime
        try:
            known = _runtimes(self._client.api)
        except DockerException as exc:
            raise SandboxUnavailable(f"the Docker engine does not answer: {exc}") from exc
        if runtime not in known:
            raise SandboxUnavailable(_missing_runtime(runtime, known))
        try:
            super().check()
        except SandboxUnavailable as exc:
            raise SandboxUnavailable(f"under the {runtime!r} runtime: {exc}") from exc
        except requests.RequestException as exc:  # a runtime that hangs holds the engine's call
            raise SandboxUnavailable(
                f"under the {runtime!r} runtime, the engine did not start a sandbox: {exc}"
            ) from exc

    def remove_orphans(self) -> int:
        """Remove every container under this worker's label and node name (or under its label
        and no node name: an older taskyard's) that another provider made, running ones too
        (a worker that died mid-cell); how many were removed. Other workers on the engine
        under the same label (other node names) keep theirs."""
        leftovers = [
            labelled["Id"]
            for labelled in self._labelled(f"{WORKER_LABEL}={self.worker_label}")
            if labelled["Labels"].get(NODE_LABEL, self.node) == self.node
            and labelled["Labels"].get(OWNER_LABEL) != self.owner
            and not _handed_off(labelled)
        ]
        for container_id in leftovers:
            self._remove_quietly(container_id)
        return len(leftovers)

    def close_all(self) -> None:
        """Stop every session and warm container, and any container this provider left (but
        those it handed off)."""
        self._leases.stop()
        super().close_all()
        for labelled in self._labelled(f"{OWNER_LABEL}={self.owner}"):
            if not _handed_off(labelled):
                self._remove_quietly(labelled["Id"])

    def _labelled(self, label: str) -> list[dict[str, Any]]:
        # The engine's list as it is, labels included: the SDK's `containers.list` fetches
        # each container again, and fails on one removed meanwhile (a warm start that failed).
        found: list[dict[str, Any]] = self._client.api.containers(
            all=True, filters={"label": label}
        )
        return found

    def _remove_quietly(self, container_id: str) -> None:
        """Remove a container that someone else may be removing too (404 or 409 then)."""
        try:
            self._client.api.remove_container(container_id, force=True)
        except NotFound:
            pass
        except APIError as exc:
            if exc.status_code != 409:  # 409: "removal ... is already in progress"
                raise


class _Leases:
    """Renews the lease of every kernel a provider holds, each `every_s`, from a thread of
    its own: while it runs, its kernels live; once it stops (the worker exits or is killed),
    each ends within `lease_s` (one handed off has its own, longer lease)."""

    def __init__(self, lease_s: float, every_s: float) -> None:
        self._lease_s = lease_s
        self._every_s = min(every_s, lease_s / 3)
        self._channels: weakref.WeakSet[DockerChannel] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        threading.Thread(target=self._renew, name="sandbox-leases", daemon=True).start()

    def keep(self, channel: DockerChannel) -> DockerChannel:
        with self._lock:
            self._channels.add(channel)
        return channel

    def stop(self) -> None:
        self._stopped.set()

    def _renew(self) -> None:
        while not self._stopped.wait(self._every_s):
            with self._lock:
                channels = list(self._channels)
            for channel in channels:
                try:
                    channel.renew(self._lease_s)
                except Exception:  # one channel's fault must not end every kernel's lease
                    log.exception("renewing a sandbox's lease failed")


def _handed_off(listed: dict[str, Any]) -> bool:
    """Whether a container (as the engine lists it) runs a kernel handed to another worker."""
    names = listed.get("Names") or []
    return listed.get("State") == "running" and any(
        name.lstrip("/").startswith(HANDOFF_PREFIX) for name in names
    )


def _create_failed(api: docker.APIClient, spec: ContainerSpec, exc: DockerException) -> str:
    """Why a container could not be made: for a runtime the engine lacks, how to add it."""
    if isinstance(exc, APIError) and "runtime" in str(exc.explanation or "").lower():
        try:
            return _missing_runtime(spec.runtime, _runtimes(api))
        except DockerException:
            pass  # the engine's own words, below
    return f"cannot create a sandbox from {spec.image!r}: {exc}"


def _runtimes(api: docker.APIClient) -> list[str]:
    """The OCI runtimes the engine has, by name."""
    return sorted(api.info().get("Runtimes") or {})


def _missing_runtime(runtime: str, known: list[str]) -> str:
    said = f"the Docker engine has no runtime {runtime!r} (TASKYARD_SANDBOX_RUNTIME); it has "
    said += ", ".join(known) or "none"
    if runtime.startswith(GVISOR):
        said += (
            ". Install gVisor (Debian: apt-get install runsc) and register it with the engine: "
            "scripts/setup_docker.sh does both (`runsc install -- --network=none` writes "
            "/etc/docker/daemon.json, then SIGHUP to dockerd)"
        )
    return said


def _connect() -> docker.DockerClient:
    try:
        client = docker.from_env()
        client.ping()
    except DockerException as exc:
        raise SandboxUnavailable(f"no Docker engine reachable: {exc}") from exc
    return client
