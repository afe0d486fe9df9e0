"""The docker backend: one locked-down container per session, running kernel.py.

The worker talks to the kernel over the container's stdin/stdout through the Docker API's
attach socket, so the container needs no network at all. Why the attach socket and not a
`docker run -i` subprocess per session: it is one socket to the local engine instead of one
CLI process (tens of MB) per session, the same client creates, signals and inspects the
container, and the multiplexed stream is only an 8-byte header per frame to strip.

Containers carry the labels ``taskyard.session`` (the session key, or "" for a warm-pool
container) and ``taskyard.owner`` (one id per provider), so leftovers of a crashed worker are
found with ``docker ps -a --filter label=taskyard.session``. Their stdin closes when the
worker's socket does, so the kernel exits with its worker; the next provider to start on the
engine removes such exited containers. (Not `auto_remove`: a container must outlive its
kernel long enough to be asked why it died, e.g. out of memory.)
"""

from __future__ import annotations

import contextlib
import logging
import socket
import struct
import time
import uuid
from dataclasses import dataclass
from typing import Any

import docker
import requests
from docker.errors import APIError, DockerException, NotFound
from docker.models.containers import Container

from shared.sandbox.channel import LineBuffer, decode_line, encode, wait_readable
from shared.sandbox.errors import KernelGone, SandboxUnavailable
from shared.sandbox.provider import KernelSandboxProvider
from shared.settings import Settings, get_settings

__all__ = ["ContainerSpec", "DockerChannel", "DockerSandboxProvider", "remove_exited"]

SESSION_LABEL = "taskyard.session"
OWNER_LABEL = "taskyard.owner"
START_TIMEOUT_S = 30.0

log = logging.getLogger(__name__)
_FRAME_HEADER = struct.Struct(">BxxxL")  # stream (1 stdout, 2 stderr), padding, payload size
_STDOUT = 1


@dataclass(frozen=True)
class ContainerSpec:
    """How every sandbox container is made: image and limits."""

    image: str
    memory: str = "256m"
    pids: int = 64
    cpus: float = 1.0
    disk: str = "64m"

    @classmethod
    def from_settings(cls, settings: Settings) -> ContainerSpec:
        return cls(
            image=settings.sandbox_image,
            memory=settings.sandbox_memory,
            pids=settings.sandbox_pids,
            cpus=settings.sandbox_cpus,
            disk=settings.sandbox_disk,
        )

    def create(self, api: docker.APIClient, labels: dict[str, str]) -> str:
        """Create a container, no network and nothing writable but its tmpfs; its id."""
        # Owned by the sandbox user: the engine copies the image directory's mode, not `mode=`.
        tmpfs = f"rw,nosuid,nodev,size={self.disk},uid=65534,gid=65534"
        host_config = api.create_host_config(
            init=True,  # docker-init forwards SIGINT to the kernel and reaps its children
            network_mode="none",
            read_only=True,
            tmpfs={"/work": tmpfs, "/tmp": tmpfs},
            mem_limit=self.memory,
            memswap_limit=self.memory,  # no swap: the memory limit is the limit
            pids_limit=self.pids,
            nano_cpus=int(self.cpus * 1e9),
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
        )
        created = api.create_container(
            self.image,
            stdin_open=True,
            detach=False,  # which sets StdinOnce: the kernel sees EOF when our socket closes
            tty=False,
            user="65534:65534",
            working_dir="/work",
            labels=labels,
            host_config=host_config,
        )
        return created["Id"]


class _Demux:
    """Splits the attach stream's frames; keeps stdout as lines and drops stderr."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._raw = bytearray()
        self._lines = LineBuffer()
        self.eof = False

    def read_line(self, timeout: float) -> bytes | None:
        """The next stdout line, or None after `timeout`; raises `KernelGone` at EOF."""
        deadline = time.monotonic() + timeout
        while (line := self._lines.pop_line()) is None:
            if self.eof:
                raise KernelGone("the container's output ended")
            left = deadline - time.monotonic()
            if left <= 0 or not self.pump(left):
                return None
        return line

    def pump(self, timeout: float) -> bool:
        """Read what arrives within `timeout`; False if nothing did."""
        if not wait_readable(self._sock.fileno(), timeout):
            return False
        try:
            chunk = self._sock.recv(1 << 16)
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
            if stream == _STDOUT:
                self._lines.feed(bytes(self._raw[_FRAME_HEADER.size : end]))
            del self._raw[:end]


class DockerChannel:
    """A `KernelChannel` to kernel.py running in one container."""

    def __init__(self, api: docker.APIClient, container: str, sock: socket.socket, memory: str):
        self._api = api
        self._container = container
        self._sock = sock
        self._memory = memory
        self._demux = _Demux(sock)
        self._closed = False

    @classmethod
    def start(
        cls, api: docker.APIClient, spec: ContainerSpec, labels: dict[str, str]
    ) -> DockerChannel:
        """Create, attach and start a container, and wait for the kernel's ready line."""
        try:
            container = spec.create(api, labels)
        except DockerException as exc:
            raise SandboxUnavailable(f"cannot create a sandbox from {spec.image!r}: {exc}") from exc
        try:
            # Attached before the start, so not a byte of output is missed.
            raw = api.attach_socket(
                container, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
            )
            api.start(container)
            channel = cls(api, container, getattr(raw, "_sock", raw), spec.memory)
            channel.wait_ready(START_TIMEOUT_S)
        except (DockerException, KernelGone) as exc:
            api.remove_container(container, force=True)
            raise SandboxUnavailable(f"the sandbox kernel did not start: {exc}") from exc
        return channel

    def wait_ready(self, timeout: float) -> None:
        line = self._demux.read_line(timeout)
        if line is None or not decode_line(line).get("ready"):
            raise KernelGone(f"no ready line within {timeout:g}s (got {line!r})")

    def send(self, message: dict[str, Any]) -> None:
        try:
            self._sock.sendall(encode(message))
        except OSError as exc:
            raise KernelGone(f"cannot write to the kernel: {exc}") from exc

    def receive(self, timeout: float) -> dict[str, Any] | None:
        line = self._demux.read_line(timeout)
        return None if line is None else decode_line(line)

    def interrupt(self) -> None:
        try:
            self._api.kill(self._container, signal="SIGINT")
        except DockerException as exc:
            raise KernelGone(f"cannot interrupt the kernel: {exc}") from exc

    def alive(self) -> bool:
        while not self._demux.eof and self._demux.pump(0):
            pass  # drain what is pending; a closed stream means the container ended
        return not self._demux.eof

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
        return f"the process exited with code {state.get('ExitCode')}"

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._sock.close()
        try:
            self._api.remove_container(self._container, force=True)
        except NotFound:
            pass  # already gone: that is the goal
        except DockerException:
            # Closing must not fail a call; the labels let an operator find what is left.
            log.warning("could not remove sandbox container %s", self._container, exc_info=True)


class DockerSandboxProvider(KernelSandboxProvider):
    """The production `SandboxProvider`: one container per session, from the sandbox image.

    Limits come from settings unless given: `spec` overrides image and limits, `client` the
    engine connection (tests hand in their own).
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        spec: ContainerSpec | None = None,
        client: docker.DockerClient | None = None,
        pool_size: int | None = None,
        idle_s: float | None = None,
    ) -> None:
        settings = settings or get_settings()
        self._spec = spec or ContainerSpec.from_settings(settings)
        self._client = client or _connect()
        self.owner = uuid.uuid4().hex[:12]
        remove_exited(self._client)
        super().__init__(
            self._start_kernel,
            pool_size=settings.sandbox_warm_pool if pool_size is None else pool_size,
            idle_s=settings.sandbox_idle_s if idle_s is None else idle_s,
        )

    def _start_kernel(self, session_key: str | None) -> DockerChannel:
        labels = {SESSION_LABEL: session_key or "", OWNER_LABEL: self.owner}
        return DockerChannel.start(self._client.api, self._spec, labels)

    def close_all(self) -> None:
        """Stop every session and warm container, and any container this provider left."""
        super().close_all()
        for container in self._client.containers.list(
            all=True, filters={"label": f"{OWNER_LABEL}={self.owner}"}
        ):
            with contextlib.suppress(NotFound):
                container.remove(force=True)


def remove_exited(client: docker.DockerClient) -> int:
    """Remove exited sandbox containers (a crashed worker's); how many were removed.

    Safe beside live providers: their containers run, and the one exited container a live
    provider may still be inspecting only costs it the exit reason.
    """
    exited = client.containers.list(all=True, filters={"label": SESSION_LABEL, "status": "exited"})
    for container in exited:
        _remove_quietly(container)
    return len(exited)


def _remove_quietly(container: Container) -> None:
    """Remove a container that another provider may be removing too (404 or 409 then)."""
    try:
        container.remove(force=True)
    except NotFound:
        pass
    except APIError as exc:
        if exc.status_code != 409:  # 409: "removal ... is already in progress"
            raise


def _connect() -> docker.DockerClient:
    try:
        client = docker.from_env()
        client.ping()
    except DockerException as exc:
        raise SandboxUnavailable(f"no Docker engine reachable: {exc}") from exc
    return client
