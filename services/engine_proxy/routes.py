"""What a request asks the engine for: its route, read from the method and the path alone.

Only the routes a sandbox needs are known; any other path is refused here, before anything
else looks at it. Container and exec references must be plain names or ids (no "/", "%" or
dot segments), so the path the engine routes is the one matched here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from services.engine_proxy.errors import Refused

__all__ = ["MIN_API", "Route", "route"]

MIN_API = (1, 40)  # older versions read other fields of a body (a start's HostConfig)
_VERSIONED = re.compile(r"/v(\d{1,2})\.(\d{1,3})(/.*)")
_REF = r"(?P<ref>[A-Za-z0-9][A-Za-z0-9_.-]{0,127})"

# (method, path after the version, route name); the first match wins.
_TABLE: list[tuple[str, re.Pattern[str], str]] = [
    (method, re.compile(path.replace("{ref}", _REF)), name)
    for method, path, name in [
        ("GET", "/_ping", "ping"),
        ("HEAD", "/_ping", "ping"),
        ("GET", "/version", "version"),
        ("GET", "/info", "info"),
        ("POST", "/containers/create", "create"),
        ("GET", "/containers/json", "list"),
        ("GET", "/containers/{ref}/json", "inspect"),
        ("POST", "/containers/{ref}/start", "start"),
        ("POST", "/containers/{ref}/attach", "attach"),
        ("POST", "/containers/{ref}/wait", "wait"),
        ("POST", "/containers/{ref}/kill", "kill"),
        ("POST", "/containers/{ref}/stop", "stop"),
        ("POST", "/containers/{ref}/resize", "resize"),
        ("DELETE", "/containers/{ref}", "remove"),
        ("GET", "/containers/{ref}/logs", "logs"),
        ("GET", "/containers/{ref}/archive", "archive"),
        ("HEAD", "/containers/{ref}/archive", "archive"),
        ("PUT", "/containers/{ref}/archive", "archive"),
        ("POST", "/containers/{ref}/exec", "exec"),
        ("POST", "/containers/{ref}/rename", "rename"),
        ("POST", "/exec/{ref}/start", "exec.start"),
        ("POST", "/exec/{ref}/resize", "exec.resize"),
        ("GET", "/exec/{ref}/json", "exec.inspect"),
    ]
]

# Routes near those allowed, refused with their own reason.
_NAMED_REFUSALS: list[tuple[str, re.Pattern[str], str]] = [
    (method, re.compile(path.replace("{ref}", _REF)), reason)
    for method, path, reason in [
        ("POST", "/containers/{ref}/update", "a sandbox's limits may not be changed (update)"),
        ("POST", "/containers/{ref}/restart", "a sandbox is not restarted: a new one is made"),
        ("POST", "/commit", "a sandbox is not made into an image (commit)"),
        ("GET", "/containers/{ref}/export", "a sandbox's files are not exported"),
    ]
]


@dataclass(frozen=True)
class Route:
    """A known route: its name, the API version prefix as sent ("" if none) and the
    container or exec the path names."""

    name: str
    version: str
    ref: str

    def path(self, tail: str) -> str:
        """A path under this route's version prefix."""
        return f"{self.version}{tail}"


def route(method: str, path: str) -> Route:
    """The route of `method` `path`; `Refused` if the path is not one a sandbox needs."""
    version, rest = _split_version(path)
    for wanted, pattern, name in _TABLE:
        if wanted == method and (found := pattern.fullmatch(rest)):
            return Route(name, version, found.groupdict().get("ref") or "")
    for wanted, pattern, reason in _NAMED_REFUSALS:
        if wanted == method and pattern.fullmatch(rest):
            raise Refused(reason)
    raise Refused(f"{method} {rest} is not something a sandbox needs")


def _split_version(path: str) -> tuple[str, str]:
    found = _VERSIONED.fullmatch(path)
    if found is None:
        return "", path
    major, minor, rest = found.groups()
    if (int(major), int(minor)) < MIN_API:
        raise Refused(f"API version {major}.{minor} is older than the engine proxy accepts", 400)
    return path[: len(path) - len(rest)], rest
