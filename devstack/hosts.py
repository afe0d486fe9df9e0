"""Several hosts on one machine: what compose on several machines does, for tests and benchmarks.

Each host is a network namespace with one address (a veth pair: one end inside, the other on a
Linux bridge), a /tmp of its own (a tmpfs, also its TMPDIR) and a hostname of its own. A holder
process keeps the host's mount and UTS namespaces alive, as a pod's pause container does, so
every process started on the host (`Host.argv`) shares its /tmp and hostname, also across
restarts. The machine itself (the test, the benchmark client) reaches the hosts through the
bridge's address; nothing routes beyond the bridge.

Addresses come from 198.18.0.0/15, the range set aside for benchmark networks: a /24 that no
network on the machine uses yet, chosen under a lock so parallel runs never collide. Every name
a run makes starts with `PREFIX` and the run's tag, and a record under `STATE_DIR` names the
process that owns the tag: a later run removes what a crashed one left (its processes, its
namespaces, its links) and nothing of a run still going. Needs root, `ip` and util-linux.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
import re
import secrets
import select
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from devstack.procs import ROOT

__all__ = ["PREFIX", "STATE_DIR", "Host", "HostNetwork", "HostSetupFailed", "remove_leftovers"]

PREFIX = "tyh"  # interface names are at most 15 characters: tyh + 6-hex tag + v + index
STATE_DIR = Path("/run/taskyard-hosts")
NETNS_DIR = Path("/run/netns")  # where `ip netns` names namespaces
RANGE = ipaddress.IPv4Network("198.18.0.0/15")
_TAG_LEN = 6
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")
_TMP_SIZE = "1g"  # a ceiling: a tmpfs holds memory only for what is written
_READY_S = 10.0
# The holder: a private /tmp and hostname, then it sleeps, holding them for the host's processes.
# What the services run from ($2...: the checkout, the interpreter's prefix) may lie under the
# machine's /tmp (a CI checkout, `mktemp -d`): the machine's /tmp is bound at $1 first, and each
# of those paths bound from there into the new /tmp, so the host sees them and nothing else.
_HOLD = """set -e
name=$0 size=$1 machine_tmp=$2
shift 2
mount --bind /tmp "$machine_tmp"
mount -t tmpfs -o "size=$size,mode=1777" tmpfs /tmp
for path in "$@"; do
  mkdir -p "$path"
  mount --bind "$machine_tmp/${path#/tmp/}" "$path"
done
umount -l "$machine_tmp"
hostname "$name"
echo ready
exec sleep infinity"""


class HostSetupFailed(RuntimeError):
    """A command making the hosts failed; the message quotes it and what it said."""


@dataclass(frozen=True)
class Host:
    """One host: its name, its address, its namespace and the holder of its namespaces."""

    name: str
    address: str
    netns: str
    holder_pid: int
    data_dir: Path = Path("/tmp")  # its own (a tmpfs): where its services keep files

    @property
    def hostname(self) -> str:
        """What Celery's %h gives on it."""
        return _hostname(self.name)

    def argv(self, argv: Sequence[str], cwd: Path = ROOT) -> list[str]:
        """`argv` run on this host from `cwd` (where `Processes` runs services): its network,
        its /tmp as TMPDIR, its hostname. The same process (nsenter execs), so signals and
        exit codes reach it as they would."""
        enter = ["nsenter", f"--target={self.holder_pid}", "--net", "--mount", "--uts",
                 f"--wd={cwd}"]  # fmt: skip
        return [*enter, "--", "env", f"TMPDIR={self.data_dir}", *argv]


class HostNetwork:
    """A bridge and one host per name, made on enter and removed on exit (also after a
    failure); `remove(name)` takes one host away as a machine that dies would go."""

    def __init__(self, names: Sequence[str]) -> None:
        bad = [name for name in names if not _NAME.fullmatch(name)]
        if bad or len(set(names)) != len(names) or not names:
            raise ValueError(f"host names must be distinct, [a-z0-9_-], up to 32: {list(names)}")
        self.names = list(names)
        self.tag = ""
        self.machine_address = ""  # the machine's own address on the bridge
        self.hosts: dict[str, Host] = {}
        self._holders: dict[str, subprocess.Popen[bytes]] = {}

    def __enter__(self) -> HostNetwork:
        self.create()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.remove_all()

    def __getitem__(self, name: str) -> Host:
        return self.hosts[name]

    @property
    def bridge(self) -> str:
        return f"{PREFIX}{self.tag}b"

    def create(self) -> None:
        """Make the bridge and every host; on any failure, remove what was made and raise."""
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        try:
            with _locked():  # the subnet is free until the bridge holds it
                remove_leftovers()
                self.tag = _claim_tag()
                subnet = _free_subnet()
                self._make_bridge(subnet)
            for index, name in enumerate(self.names, start=2):
                self._make_host(name, index, subnet)
        except BaseException:
            self.remove_all()
            raise

    def _make_bridge(self, subnet: ipaddress.IPv4Network) -> None:
        self.machine_address = str(subnet.network_address + 1)
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.machine_address}/{subnet.prefixlen}", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")

    def _make_host(self, name: str, index: int, subnet: ipaddress.IPv4Network) -> None:
        netns, outside, inside = f"{PREFIX}{self.tag}-{name}", self._veth(index), "eth0"
        address = str(subnet.network_address + index)
        peer = f"{PREFIX}{self.tag}p{index}"  # renamed once inside
        _ip("netns", "add", netns)
        _ip("link", "add", outside, "type", "veth", "peer", "name", peer)
        _ip("link", "set", peer, "netns", netns)
        _ip("link", "set", outside, "master", self.bridge, "up")
        _ip("-n", netns, "link", "set", peer, "name", inside)
        _ip("-n", netns, "addr", "add", f"{address}/{subnet.prefixlen}", "dev", inside)
        _ip("-n", netns, "link", "set", inside, "up")
        _ip("-n", netns, "link", "set", "lo", "up")  # its own loopback, as any machine has
        self.hosts[name] = Host(name, address, netns, self._start_holder(name, netns))

    def _veth(self, index: int) -> str:
        return f"{PREFIX}{self.tag}v{index}"

    def _start_holder(self, name: str, netns: str) -> int:
        machine_tmp = STATE_DIR / f"{netns}.tmp"  # a mount point inside its namespace only
        machine_tmp.mkdir(exist_ok=True)
        argv = ["nsenter", f"--net={NETNS_DIR / netns}", "unshare", "--mount", "--uts",
                "--propagation", "private", "--", "sh", "-c", _HOLD, _hostname(name), _TMP_SIZE,
                str(machine_tmp), *_under_tmp(ROOT, Path(sys.prefix))]  # fmt: skip
        holder = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  start_new_session=True)  # fmt: skip
        self._holders[name] = holder
        assert holder.stdout is not None and holder.stderr is not None
        ready, _, _ = select.select([holder.stdout], [], [], _READY_S)
        if not ready or holder.stdout.readline().strip() != b"ready":
            holder.kill()
            said = holder.stderr.read().decode(errors="replace").strip()
            raise HostSetupFailed(f"host {name}: its namespaces were not made: {said}")
        return holder.pid

    def remove(self, name: str) -> None:
        """Take host `name` away: SIGKILL every process on it, delete its namespace (which
        deletes its veth pair)."""
        host = self.hosts.pop(name)
        _remove_netns(host.netns)
        holder = self._holders.pop(name, None)
        if holder is not None:
            holder.kill()
            holder.wait()

    def remove_all(self) -> None:
        """Remove every host left, the bridge and this run's record; quiet about what is gone."""
        for name in list(self.hosts):
            self.remove(name)
        for name, holder in self._holders.items():  # a host that failed half-way
            holder.kill()
            holder.wait()
            _remove_netns(f"{PREFIX}{self.tag}-{name}")
        self._holders.clear()
        if self.tag:
            for link in _names_with(_link_names(), self.tag):
                _quiet_ip("link", "del", link)
            _remove_netns_of(self.tag)
            (STATE_DIR / f"{self.tag}.json").unlink(missing_ok=True)


def _under_tmp(*paths: Path) -> list[str]:
    """Those of `paths` that lie under /tmp (resolved), leaving out any inside another."""
    found = sorted({p.resolve() for p in paths if p.resolve().is_relative_to("/tmp")})
    outermost = [p for p in found if not any(p != q and p.is_relative_to(q) for q in found)]
    return [str(p) for p in outermost]


def _hostname(name: str) -> str:
    return name.replace("_", "-")  # a hostname has no "_"


def remove_leftovers() -> None:
    """Remove what runs whose owner is gone left behind: processes, namespaces, links."""
    live = {tag for tag, owner in _records().items() if _alive(owner)}
    for name in _netns_names():
        if name.startswith(PREFIX) and _tag_of(name) not in live:
            _remove_netns(name)
    for name in _link_names():
        if name.startswith(PREFIX) and _tag_of(name) not in live:
            _quiet_ip("link", "del", name)
    for tag in set(_records()) - live:
        (STATE_DIR / f"{tag}.json").unlink(missing_ok=True)
    for point in STATE_DIR.glob(f"{PREFIX}*.tmp"):
        if _tag_of(point.name) not in live:
            with contextlib.suppress(OSError):
                point.rmdir()


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    with (STATE_DIR / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _claim_tag() -> str:
    """A tag no record holds, recorded for this process before anything is named with it."""
    taken = set(_records()) | {_tag_of(n) for n in _netns_names() + _link_names()}
    while (tag := secrets.token_hex(_TAG_LEN // 2)) in taken:
        pass
    me = {"pid": os.getpid(), "started": _start_time(os.getpid())}
    (STATE_DIR / f"{tag}.json").write_text(json.dumps(me))
    return tag


def _records() -> dict[str, dict[str, int]]:
    found = {}
    for path in STATE_DIR.glob("*.json"):
        with contextlib.suppress(OSError, ValueError):
            found[path.stem] = json.loads(path.read_text())
    return found


def _alive(owner: dict[str, int]) -> bool:
    """Whether the process that made a record still runs (its id may have been reused)."""
    pid = owner.get("pid", 0)
    return bool(pid) and _start_time(pid) == owner.get("started")


def _start_time(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])  # field 22, after the command's name


def _free_subnet() -> ipaddress.IPv4Network:
    """The first /24 of `RANGE` that no address or route of this machine overlaps."""
    used = [ipaddress.ip_network(n, strict=False) for n in _machine_networks()]
    for subnet in RANGE.subnets(new_prefix=24):
        if not any(subnet.overlaps(net) for net in used):
            return subnet
    raise HostSetupFailed(f"every /24 of {RANGE} is in use on this machine")


def _machine_networks() -> list[str]:
    addrs = [f"{a['local']}/{a['prefixlen']}" for link in _ip_json("-4", "addr", "show")
             for a in link.get("addr_info", [])]  # fmt: skip
    routes = [r["dst"] for r in _ip_json("-4", "route", "show", "table", "all")
              if r.get("dst", "default") != "default"]  # fmt: skip
    return addrs + routes


def _tag_of(name: str) -> str:
    return name[len(PREFIX) : len(PREFIX) + _TAG_LEN]


def _names_with(names: list[str], tag: str) -> list[str]:
    return [name for name in names if name.startswith(PREFIX + tag)]


def _netns_names() -> list[str]:
    return [str(ns["name"]) for ns in _ip_json("netns", "list")]


def _link_names() -> list[str]:
    return [str(link["ifname"]) for link in _ip_json("link", "show")]


def _remove_netns_of(tag: str) -> None:
    for name in _names_with(_netns_names(), tag):
        _remove_netns(name)


def _remove_netns(name: str) -> None:
    """SIGKILL every process in namespace `name` (all started on its host), then delete it."""
    pids = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True).stdout
    for pid in pids.split():
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGKILL)
    _quiet_ip("netns", "del", name)
    with contextlib.suppress(OSError):  # the holder's mount point (empty: mounted only inside)
        (STATE_DIR / f"{name}.tmp").rmdir()


def _ip(*args: str) -> str:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise HostSetupFailed(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def _ip_json(*args: str) -> list[dict[str, Any]]:
    text = _ip("-j", *args).strip()
    return list(json.loads(text)) if text else []


def _quiet_ip(*args: str) -> None:
    subprocess.run(["ip", *args], capture_output=True, timeout=30)
