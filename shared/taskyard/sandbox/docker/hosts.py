"""Many sessions of one tenant per container: the worker's side of the fork server.

A host is one sandbox container running the kernel with ``--sessions``: its fork server makes
each session a copy-on-write fork of a pre-imported interpreter, walled off in namespaces of
its own (`kernel/isolation.py`). The worker holds one attach socket per host; requests and
replies carry the session's key on the host, and each session is a `KernelChannel` of its own
(`HostedChannel`), so everything above (`session.py`, the provider) is unchanged.

Hosts belong to one tenant for life: sessions of two tenants never share a container. A
tenant's new session takes a free seat on one of its hosts; where none is free it waits for
a host being started for the tenant, and another host is started only while the tenant's
waiting sessions outnumber the seats on the way. Hosts are also started ahead, in the
background, while the tenant's free seats would not last out a host's start at its recent
rate of new sessions (`_start_ahead`). Hosts come from a warm pool of unclaimed
containers (`pool.py`), sized like the kernel pool by recent demand; a host whose last
session closed is removed.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import math
import threading
import time
import uuid
from collections import defaultdict, deque
from collections.abc import Callable
from typing import Any

from taskyard.sandbox.channel import KernelChannel, StartKernel
from taskyard.sandbox.demand import PoolBounds
from taskyard.sandbox.docker.channel import START_TIMEOUT_S, DockerChannel
from taskyard.sandbox.errors import KernelGone, SandboxUnavailable
from taskyard.sandbox.pool import PoolState, WarmPool
from taskyard.sandbox.provider import tenant_of

__all__ = ["HostedChannel", "SessionHost", "SessionHosts", "hosts_ahead"]

log = logging.getLogger(__name__)
_PUMP_S = 0.05  # a waiter pumping the host's socket looks at its own queue this often
# Starting hosts ahead: new sessions are counted over this window; a host taken from the warm
# pool in under _WARM_S was warm; a cold start is first guessed at _FIRST_START_S; at most
# _MOST_AHEAD hosts start at once for a tenant (each costs a core for a second or two).
_RATE_WINDOW_S = 2.0
_WARM_S = 0.2
_FIRST_START_S = 2.0
_MOST_AHEAD = 4
OnClose = Callable[["SessionHost"], None]


class SessionHost:
    """One container's fork server, shared by its sessions: replies routed by session key.

    Whichever caller waits for a reply reads the container's socket for everyone (one at a
    time) and files each line under its session, so no thread per host is needed.
    """

    def __init__(self, channel: DockerChannel, tenant: str, capacity: int) -> None:
        self.channel = channel
        self.tenant = tenant
        self.capacity = capacity
        self._seats = 0  # reserved: sessions open or opening
        self._replies: dict[str, deque[dict[str, Any]]] = {}
        self._gone: dict[str, str] = {}
        self._dead: str | None = None  # why the container itself ended
        self._cond = threading.Condition()
        self._pumping = False

    @property
    def container(self) -> str:
        return self.channel.container

    def reserve(self) -> bool:
        """Take a seat for a session about to open; False if the host is full or dead."""
        with self._cond:
            if self._dead is not None or self._seats >= self.capacity:
                return False
            self._seats += 1
            return True

    @property
    def empty(self) -> bool:
        with self._cond:
            return self._seats == 0

    @property
    def free(self) -> int:
        """Seats a new session could take now (none on a dead host)."""
        with self._cond:
            return 0 if self._dead is not None else self.capacity - self._seats

    def open(self, deadline: float, on_close: OnClose) -> HostedChannel:
        """Open a session on a seat reserved for it: a walled-off fork, ready for cells. On
        failure the seat is freed."""
        # Unique across workers: a host handed over keeps its sessions' keys.
        key = self.adopt(uuid.uuid4().hex[:16])
        try:
            self.send(key, {"open": key}, deadline, keyed=False)
            reply = self.receive(key, deadline)
        except KernelGone as gone:
            self.close_session(key)
            raise SandboxUnavailable(f"the sandbox host did not open a session: {gone}") from gone
        if reply is None or not reply.get("opened"):
            self.close_session(key)
            why = "no answer in time" if reply is None else reply
            raise SandboxUnavailable(f"the sandbox host did not open a session: {why}")
        return HostedChannel(self, key, on_close)

    def adopt(self, key: str) -> str:
        """Route replies for session `key` (one opening here, or one handed over running)."""
        with self._cond:
            self._replies[key] = deque()
            self._gone.pop(key, None)
        return key

    def take(self, key: str, on_close: OnClose) -> HostedChannel:
        """A running session handed over from another worker, on a seat of its own."""
        with self._cond:
            self._seats += 1
        return HostedChannel(self, self.adopt(key), on_close)

    def keys(self) -> list[str]:
        with self._cond:
            return list(self._replies)

    def send(self, key: str, message: dict[str, Any], deadline: float, keyed: bool = True) -> None:
        self._raise_if_gone(key)
        self.channel.send({"session": key, **message} if keyed else message, deadline)

    def receive(self, key: str, deadline: float) -> dict[str, Any] | None:
        """The session's next reply, or None at `deadline`; `KernelGone` once it ended."""
        while True:
            with self._cond:
                queue = self._replies.get(key)
                if queue:
                    return queue.popleft()
                self._raise_if_gone(key)
                now = time.monotonic()
                if now >= deadline:
                    return None
                if self._pumping:
                    self._cond.wait(deadline - now)
                    continue
                self._pumping = True
            self._pump(min(deadline, time.monotonic() + _PUMP_S))

    def _pump(self, deadline: float) -> None:
        """Read what the container sent by `deadline`, filing each line under its session."""
        try:
            while (line := self.channel.receive(deadline)) is not None:
                self._file(line)
                deadline = time.monotonic()  # take what is there already, wait no longer
        except KernelGone as gone:
            with self._cond:
                self._dead = str(gone)
        finally:
            with self._cond:
                self._pumping = False
                self._cond.notify_all()

    def _file(self, line: dict[str, Any]) -> None:
        key = line.get("session")
        with self._cond:
            if key not in self._replies:
                return  # a session closed meanwhile, or a line about none
            if "gone" in line:
                self._gone[key] = str(line["gone"])
            else:
                self._replies[key].append(line)

    def _raise_if_gone(self, key: str) -> None:
        if key in self._gone:
            raise KernelGone(self._gone[key])
        if self._dead is not None:
            raise KernelGone(self._dead)

    def alive(self, key: str) -> bool:
        """Whether the session still runs (what the container said so far is read first)."""
        with self._cond:
            idle = not self._pumping
            if idle:
                self._pumping = True
        if idle:
            self._pump(time.monotonic())
        with self._cond:
            return key not in self._gone and self._dead is None and self.channel.alive()

    def exit_reason(self, key: str) -> str:
        with self._cond:
            said = self._gone.get(key)
        return said if said is not None else self.channel.exit_reason()

    def close_session(self, key: str) -> None:
        """Stop one session (its whole pid namespace) and free its seat."""
        with self._cond:
            if self._replies.pop(key, None) is None:
                return
            self._gone.pop(key, None)
            self._seats -= 1
            dead = self._dead is not None
        if not dead:
            with contextlib.suppress(KernelGone):  # the container ended: so did the session
                self.channel.send({"close": key}, time.monotonic() + START_TIMEOUT_S)

    def close(self) -> None:
        self.channel.close()


class HostedChannel:
    """A `KernelChannel` (and a `SharedKernel`) to one session on a host; `on_close` learns
    when it closed."""

    def __init__(self, host: SessionHost, key: str, on_close: OnClose) -> None:
        self.host = host
        self.key = key
        self._on_close = on_close
        self._closed = False

    def send(self, message: dict[str, Any], deadline: float) -> None:
        self.host.send(self.key, message, deadline)

    def receive(self, deadline: float) -> dict[str, Any] | None:
        return self.host.receive(self.key, deadline)

    def alive(self) -> bool:
        return not self._closed and self.host.alive(self.key)

    def key_beside(self, other: KernelChannel) -> str | None:
        """See `SharedKernel`: sessions of one host reach each other's files there."""
        return other.key if isinstance(other, HostedChannel) and other.host is self.host else None

    def exit_reason(self) -> str:
        return self.host.exit_reason(self.key)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.host.close_session(self.key)
            self._on_close(self.host)


def hosts_ahead(free: int, starting: int, capacity: int, rate: float, start_s: float) -> int:
    """How many more hosts to start for a tenant with `free` seats and `starting` hosts on
    the way, whose sessions arrive at `rate` a second, a host taking `start_s` to start: enough
    for twice what arrives meanwhile (a quarter of a host at least), `_MOST_AHEAD` at once."""
    wanted = max(capacity / 4, 2 * rate * start_s)
    short = wanted - free - starting * capacity
    if short <= 0:
        return 0
    return max(0, min(math.ceil(short / capacity), _MOST_AHEAD - starting))


class SessionHosts:
    """The `StartKernel` of the fork-server backend: a session on one of its tenant's hosts."""

    def __init__(self, start_host: StartKernel, capacity: int, bounds: PoolBounds) -> None:
        """`start_host` starts an unclaimed fork-server container (a `DockerChannel`)."""
        self._capacity = capacity
        self._pool = WarmPool(start_host, bounds)
        self._hosts: dict[str, list[SessionHost]] = defaultdict(list)
        self._waiting: dict[str, int] = defaultdict(int)  # sessions waiting for a seat
        self._starting: dict[str, int] = defaultdict(int)  # hosts being started for a tenant
        self._arrivals: dict[str, deque[float]] = defaultdict(deque)  # its sessions' starts
        self._start_s = _FIRST_START_S  # how long a host took to start, lately
        self._cond = threading.Condition()
        self._checks = itertools.count(1)

    def __call__(self, session_key: str | None) -> HostedChannel:
        # A check (no session) gets a host of its own, removed when the check's session ends.
        tenant = f"-check-{next(self._checks)}" if session_key is None else tenant_of(session_key)
        self._arrived(tenant)
        host = self._seat(tenant)
        self._start_ahead(tenant)
        try:
            return host.open(time.monotonic() + START_TIMEOUT_S, self.release)
        except BaseException:
            self.release(host)
            raise

    def _seat(self, tenant: str) -> SessionHost:
        """A host of `tenant` with a seat reserved on it, waiting for (or starting) one."""
        with self._cond:
            self._waiting[tenant] += 1
            try:
                while True:
                    host = self._free_host(tenant)
                    if host is not None:
                        return host
                    if self._starting[tenant] * self._capacity < self._waiting[tenant]:
                        break
                    self._cond.wait()
                self._starting[tenant] += 1
            finally:
                self._waiting[tenant] -= 1
        return self._start_for(tenant)

    def _arrived(self, tenant: str) -> None:
        now = time.monotonic()
        with self._cond:
            arrivals = self._arrivals[tenant]
            arrivals.append(now)
            while arrivals[0] < now - _RATE_WINDOW_S:
                arrivals.popleft()

    def _start_ahead(self, tenant: str) -> None:
        """Start the tenant's next hosts in the background while the seats free and on the
        way would not last out one host's start at its recent rate of new sessions (a quarter
        of a host at least), so that a burst finds seats instead of waiting for a container."""
        with self._cond:
            free = sum(host.free for host in self._hosts[tenant])
            rate = len(self._arrivals[tenant]) / _RATE_WINDOW_S
            more = hosts_ahead(free, self._starting[tenant], self._capacity, rate, self._start_s)
            self._starting[tenant] += more
        for _ in range(more):
            threading.Thread(target=self._start_quietly, args=(tenant,),
                             name="sandbox-host-ahead", daemon=True).start()  # fmt: skip

    def _start_quietly(self, tenant: str) -> None:
        try:
            self._start_for(tenant, seated=False)
        except SandboxUnavailable:
            log.warning("could not start a sandbox host ahead for %s", tenant, exc_info=True)

    def _start_for(self, tenant: str, seated: bool = True) -> SessionHost:
        """Start (or take from the pool) a host for `tenant`, a seat on it reserved if
        `seated`; the caller counted it in `_starting`."""
        host: SessionHost | None = None
        began = time.monotonic()
        try:
            started = self._pool.take(tenant)
            self._timed(time.monotonic() - began)
            assert isinstance(started, DockerChannel)
            host = SessionHost(started, tenant, self._capacity)
            if seated:
                host.reserve()
            return host
        finally:
            with self._cond:
                self._starting[tenant] -= 1
                if host is not None:
                    self._hosts[tenant].append(host)
                self._cond.notify_all()

    def _timed(self, seconds: float) -> None:
        """A host start took `seconds` (a warm one from the pool: about none); the estimate
        follows the cold ones, as those are what a burst waits for."""
        if seconds > _WARM_S:
            with self._cond:
                self._start_s = (self._start_s + seconds) / 2

    def _free_host(self, tenant: str) -> SessionHost | None:
        for host in self._hosts[tenant]:
            if host.reserve():
                return host
        return None

    def attached(self, container: str) -> SessionHost | None:
        """The host this worker holds in `container`, if any."""
        return next((h for h in self.hosts() if h.container == container), None)

    def take_over(self, host: SessionHost, key: str) -> HostedChannel:
        """Session `key` of `host`, which another worker handed over: the host joins its
        tenant's once, each of its sessions as it is taken over."""
        with self._cond:
            if host not in self._hosts[host.tenant]:
                self._hosts[host.tenant].append(host)
        return host.take(key, self.release)

    def pool_state(self) -> PoolState:
        return self._pool.state()

    def hosts(self) -> list[SessionHost]:
        with self._cond:
            return [host for hosts in self._hosts.values() for host in hosts]

    def release(self, host: SessionHost) -> None:
        """A host none of whose seats is taken is removed: it never serves another tenant."""
        with self._cond:
            if not host.empty:
                return
            hosts = self._hosts.get(host.tenant, [])
            if host in hosts:
                hosts.remove(host)
            if not hosts:
                self._hosts.pop(host.tenant, None)
        host.close()

    def close(self) -> None:
        self._pool.close()
        for host in self.hosts():
            host.close()
