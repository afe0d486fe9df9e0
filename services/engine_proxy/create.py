"""The create rule: a container only as a sandbox is made, and labelled as its caller's.

Every field a sandbox sets is checked against what a sandbox may ask for (`Limits`); every
other field must be left unset (absent, null, or empty), so a field this module does not know,
a newer engine's included, passes only when it asks for nothing. Two fields must be absent
outright, because the engine reads an empty list there as "none of the defaults":
`MaskedPaths` and `ReadonlyPaths`. All that is wrong with a body is said at once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from services.engine_proxy.bodies import Wire, is_zero, parse_model
from services.engine_proxy.errors import Refused
from services.engine_proxy.fork_servers import (
    FORK_SERVER_PIDS,
    fork_server_profile_problems,
    forks,
)
from services.engine_proxy.ownership import CALLER_LABEL
from services.engine_proxy.settings import EngineProxySettings, size_bytes

__all__ = ["Checked", "Limits", "check_create"]

_NO_NEW_PRIVILEGES = frozenset({"no-new-privileges", "no-new-privileges:true",
                                "no-new-privileges=true"})  # fmt: skip
_PRIVATE_IPC = frozenset({"", "private", "none"})
# The sysctls of the container's own IPC namespace, the only ones a sandbox sets.
_IPC_SYSCTLS = ("kernel.shm", "kernel.msg", "kernel.sem", "fs.mqueue.")
_TMPFS_FLAGS = frozenset({"rw", "ro", "nosuid", "nodev", "noexec", "exec"})
_TMPFS_VALUES = frozenset({"size", "uid", "gid", "mode"})
_UNSET_ONLY = frozenset({"MaskedPaths", "ReadonlyPaths"})


@dataclass(frozen=True)
class Limits:
    """What a sandbox may ask for."""

    image: str
    runtimes: frozenset[str]
    user: str
    tmpfs_paths: frozenset[str]
    max_memory: int
    max_pids: int
    max_nano_cpus: int
    max_disk: int
    max_sessions: int = 1
    ulimit_caps: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_settings(cls, settings: EngineProxySettings) -> Limits:
        pids = settings.engine_proxy_max_pids
        return cls(
            image=settings.sandbox_image,
            runtimes=settings.runtimes,
            user=settings.engine_proxy_user,
            tmpfs_paths=settings.tmpfs_paths,
            max_memory=size_bytes(settings.engine_proxy_max_memory),
            max_pids=pids,
            max_nano_cpus=int(settings.engine_proxy_max_cpus * 1e9),
            max_disk=size_bytes(settings.engine_proxy_max_disk),
            max_sessions=settings.engine_proxy_max_sessions,
            # Per process: open files, processes (gVisor counts them), message queue bytes.
            ulimit_caps={"nofile": 4096, "nproc": pids, "msgqueue": 819200},
        )


class UlimitEntry(Wire):
    Name: str
    Soft: int
    Hard: int


class LogSettings(Wire):
    Type: str = ""
    Config: dict[str, str] | None = None


class HostSettings(Wire):
    """The host config fields a sandbox sets; any other is an extra that must be unset."""

    NetworkMode: str | None = None
    ReadonlyRootfs: bool | None = None
    Tmpfs: dict[str, str] | None = None
    ShmSize: int | None = None
    Memory: int | None = None
    MemorySwap: int | None = None
    NanoCpus: int | None = None
    PidsLimit: int | None = None
    CapDrop: list[str] | None = None
    SecurityOpt: list[str] | None = None
    IpcMode: str | None = None
    Sysctls: dict[str, str] | None = None
    Ulimits: list[UlimitEntry] | None = None
    LogConfig: LogSettings | None = None
    Runtime: str | None = None


class CreateBody(Wire):
    """A create request's body: the container's config, its host config."""

    Image: str = ""
    User: str | None = None
    Labels: dict[str, str] | None = None
    HostConfig: HostSettings = HostSettings()
    # Free for a sandbox to choose: they reach nothing outside the container.
    Hostname: str | None = None
    Domainname: str | None = None
    Env: list[str] | None = None
    Cmd: list[str] | str | None = None
    Entrypoint: list[str] | str | None = None
    WorkingDir: str | None = None
    Tty: bool | None = None
    OpenStdin: bool | None = None
    StdinOnce: bool | None = None
    AttachStdin: bool | None = None
    AttachStdout: bool | None = None
    AttachStderr: bool | None = None
    StopSignal: str | None = None
    StopTimeout: int | None = None
    NetworkDisabled: bool | None = None
    ArgsEscaped: bool | None = None
    Shell: list[str] | None = None


@dataclass(frozen=True)
class Checked:
    """A create that passed: the body to forward (labelled) and the image it names."""

    body: bytes
    image: str


def check_create(body: bytes, caller: str, limits: Limits) -> Checked:
    """The create body checked against `limits` and labelled as `caller`'s; `Refused` with
    every problem found. The image is checked by name only: an image named another way (an
    id, a digest) is for the caller to resolve (`Checked.image`)."""
    create = parse_model(CreateBody, body, "create")
    host = create.HostConfig
    problems = [
        *_config_problems(create, caller, limits),
        *_isolation_problems(host, limits),
        *_limit_problems(host, limits),
        *_unset_problems("", create.extras()),
        *_unset_problems("HostConfig.", host.extras()),
    ]
    if problems:
        raise Refused("; ".join(problems))
    data = create.model_dump(exclude_unset=True)
    data["Labels"] = {**(create.Labels or {}), CALLER_LABEL: caller}
    return Checked(json.dumps(data).encode(), create.Image)


def _config_problems(create: CreateBody, caller: str, limits: Limits) -> list[str]:
    problems = []
    if not create.Image:
        problems.append("Image is missing")
    if create.User != limits.user:
        problems.append(f"User must be {limits.user!r}, the sandbox's user (not {create.User!r})")
    claimed = (create.Labels or {}).get(CALLER_LABEL, caller)
    if claimed != caller:
        problems.append(f"the label {CALLER_LABEL} names another worker ({claimed!r})")
    return problems


def _isolation_problems(host: HostSettings, limits: Limits) -> list[str]:
    problems = []
    if host.NetworkMode != "none":
        problems.append(f"HostConfig.NetworkMode must be 'none' (not {host.NetworkMode!r})")
    if host.ReadonlyRootfs is not True:
        problems.append("HostConfig.ReadonlyRootfs must be true")
    if host.Runtime not in limits.runtimes:
        allowed = ", ".join(sorted(limits.runtimes))
        problems.append(f"HostConfig.Runtime must be one of {allowed} (not {host.Runtime!r})")
    if host.IpcMode not in (None, *_PRIVATE_IPC):
        problems.append(f"HostConfig.IpcMode must be private (not {host.IpcMode!r})")
    if "ALL" not in [cap.upper() for cap in host.CapDrop or []]:
        problems.append("HostConfig.CapDrop must hold ALL")
    options = [o for o in host.SecurityOpt or [] if not o.startswith("seccomp=")]
    if any(option not in _NO_NEW_PRIVILEGES for option in options) or not options:
        problems.append(
            "HostConfig.SecurityOpt may hold only no-new-privileges (and a fork server's "
            f"seccomp profile), and must hold no-new-privileges (not {host.SecurityOpt})"
        )
    problems += fork_server_profile_problems(host.SecurityOpt or [])
    stray = [name for name in host.Sysctls or {} if not name.startswith(_IPC_SYSCTLS)]
    if stray:
        problems.append(f"HostConfig.Sysctls may set only IPC ones (not {stray})")
    log = host.LogConfig
    if log is None or log.Type != "none" or log.Config:
        problems.append("HostConfig.LogConfig must be the 'none' driver (no file on the host)")
    return problems


def _limit_problems(host: HostSettings, limits: Limits) -> list[str]:
    # A fork server's container holds up to `max_sessions` sandboxes, each limited inside it.
    fork_server = forks(host.SecurityOpt or [])
    sessions = limits.max_sessions if fork_server else 1
    host_pids = FORK_SERVER_PIDS if fork_server else 0
    problems = [
        *_at_most("Memory", host.Memory, limits.max_memory * sessions),
        *_at_most("MemorySwap", host.MemorySwap, limits.max_memory * sessions),
        *_at_most("NanoCpus", host.NanoCpus, limits.max_nano_cpus),
        *_at_most("PidsLimit", host.PidsLimit, limits.max_pids * sessions + host_pids),
        *_tmpfs_problems(host.Tmpfs or {}, limits),
        *_ulimit_problems(host.Ulimits or [], limits),
    ]
    if host.Memory and host.MemorySwap and host.MemorySwap < host.Memory:
        problems.append("HostConfig.MemorySwap must be at least HostConfig.Memory")
    if host.ShmSize is not None and not 0 <= host.ShmSize <= limits.max_disk:
        problems.append(f"HostConfig.ShmSize must be at most {limits.max_disk}")
    return problems


def _at_most(name: str, value: int | None, most: int) -> list[str]:
    if value is None or not 0 < value <= most:
        return [f"HostConfig.{name} must be set, from 1 to {most} (not {value})"]
    return []


def _tmpfs_problems(tmpfs: dict[str, str], limits: Limits) -> list[str]:
    problems = []
    for path, options in tmpfs.items():
        if path not in limits.tmpfs_paths:
            allowed = ", ".join(sorted(limits.tmpfs_paths))
            problems.append(f"HostConfig.Tmpfs may mount only {allowed} (not {path!r})")
            continue
        pairs = [option.partition("=") for option in options.split(",")]
        flags = {name for name, eq, _ in pairs if not eq}
        values = {name: value for name, eq, value in pairs if eq}
        if flags - _TMPFS_FLAGS or set(values) - _TMPFS_VALUES or not {"nosuid", "nodev"} <= flags:
            problems.append(f"HostConfig.Tmpfs[{path!r}] options must be nosuid,nodev,size=...")
        elif not _size_within(values.get("size", ""), limits.max_disk):
            problems.append(f"HostConfig.Tmpfs[{path!r}] needs a size of at most {limits.max_disk}")
    return problems


def _size_within(text: str, most: int) -> bool:
    try:
        return 0 < size_bytes(text) <= most
    except (ValueError, KeyError, IndexError):
        return False


def _ulimit_problems(ulimits: list[UlimitEntry], limits: Limits) -> list[str]:
    problems = []
    for limit in ulimits:
        cap = limits.ulimit_caps.get(limit.Name)
        if cap is None or not 0 <= limit.Soft <= limit.Hard <= cap:
            problems.append(f"HostConfig.Ulimits[{limit.Name!r}] is past what a sandbox may set")
    return problems


def _unset_problems(prefix: str, extras: dict[str, Any]) -> list[str]:
    problems = []
    for name, value in extras.items():
        if name in _UNSET_ONLY and value is not None:
            problems.append(f"{prefix}{name} must be left unset (the engine's defaults stay)")
        elif not is_zero(value):
            problems.append(f"{prefix}{name} is not allowed (a sandbox leaves it unset)")
    return problems
