"""The worker's channel to a kernel in a container (`DockerChannel`), and the leases that keep
the kernels it holds alive (`Leases`).

The worker talks to the kernel over the container's stdin/stdout through the Docker API's
attach socket, so the container needs no network at all. Why the attach socket and not a
`docker run -i` subprocess per session: it is one socket to the local engine instead of one
CLI process (tens of MB) per session, the same client creates, stops and inspects the
container, and the multiplexed stream is only an 8-byte header per frame to strip. Stderr
(only the kernel's own messages reach it) is read from that stream, keeping its last few KB.

The container's stdin outlives the worker's socket (so that a planned exit can hand the kernel
to another worker), so the worker renews a lease on each kernel it holds: one whose worker is
silent `TOOL_WORKER_DEAD_S` ends, mid-cell too.
"""

from __future__ import annotations

import logging
import socket
import struct
import threading
import time
import weakref
from typing import Any

import docker
import requests
from docker.errors import APIError, DockerException, NotFound

from taskyard.sandbox.channel import (
    OutputTail,
    ReplyLines,
    describe_exit,
    encode_line,
    wait_readable,
    write_within,
)
from taskyard.sandbox.docker.spec import ContainerSpec, create_failed
from taskyard.sandbox.errors import KernelGone, SandboxError, SandboxUnavailable

__all__ = ["START_TIMEOUT_S", "DockerChannel", "Leases", "remove_container"]

START_TIMEOUT_S = 30.0
_RENEW_WRITE_S = 2.0  # a lease line a kernel does not take in this long: it is stuck or gone
_FRAME_HEADER = struct.Struct(">BxxxL")  # stream (1 stdout, 2 stderr), padding, payload size
_STDOUT, _STDERR = 1, 2

log = logging.getLogger(__name__)


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
            raise SandboxUnavailable(create_failed(api, spec, exc)) from exc
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
            _remove(api, container)
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
        _remove(self._api, self._container)


def remove_container(api: docker.APIClient, container: str) -> None:
    """Remove a container that someone else may be removing too (a provider closing while a
    host starts ahead): gone (404), or its removal under way (409), is the goal."""
    try:
        api.remove_container(container, force=True)
    except NotFound:
        pass
    except APIError as exc:
        if exc.status_code != 409:  # 409: "removal ... is already in progress"
            raise


def _remove(api: docker.APIClient, container: str) -> None:
    """`remove_container`, never raising: a close must not fail a call, nor a failed start
    hide why it failed. The labels let an operator find what is left."""
    try:
        remove_container(api, container)
    except (DockerException, requests.RequestException):
        log.warning("could not remove sandbox container %s", container, exc_info=True)


class Leases:
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
