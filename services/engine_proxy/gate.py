"""The decision on each request: what is forwarded to the engine (`Forward`), or why not
(`Refused`).

One handler per route (`routes`). Each allows only the query parameters its route needs,
re-encoded, and a body only where the route takes one; a container is named to the engine by
the full id the proxy checked, never by the name or prefix the worker sent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

import orjson
import structlog

from services.engine_proxy.create import Limits, check_create
from services.engine_proxy.engine import Engine
from services.engine_proxy.errors import Refused
from services.engine_proxy.execs import check_exec, check_exec_start
from services.engine_proxy.holdings import Holdings
from services.engine_proxy.ownership import Holding, holding
from services.engine_proxy.routes import Route
from services.engine_proxy.wire import Request

__all__ = ["Forward", "Gate"]

log = structlog.stdlib.get_logger(__name__)

# Each route's query parameters; any other is refused.
_QUERY: dict[str, frozenset[str]] = {
    name: frozenset(keys.split())
    for name, keys in {
        "ping": "", "version": "", "info": "", "create": "name",
        "list": "all limit size filters since before trunc_cmd", "inspect": "size",
        "start": "detachKeys", "attach": "logs stream stdin stdout stderr detachKeys",
        "wait": "condition", "kill": "signal", "stop": "t signal", "resize": "h w",
        "remove": "force v link",
        "logs": "follow stdout stderr since until timestamps tail details",
        "archive": "path noOverwriteDirNonDir copyUIDGID", "exec": "", "rename": "name",
        "exec.start": "", "exec.resize": "h w", "exec.inspect": "",
    }.items()
}  # fmt: skip
_WITH_BODY = frozenset({"create", "exec", "exec.start", "archive"})
# Acting on a container: the route's path after /containers/<id>.
_CONTAINER_PATHS = {
    "inspect": "/json", "start": "/start", "attach": "/attach", "wait": "/wait",
    "kill": "/kill", "stop": "/stop", "resize": "/resize", "remove": "", "logs": "/logs",
    "archive": "/archive",
}  # fmt: skip
_FALSE = frozenset({"", "0", "false", "False"})  # what the Docker SDK sends for an unset flag
_IMAGE_REF = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/:@")

AfterAnswer = Callable[[int, bytes], bytes]


@dataclass(frozen=True)
class Forward:
    """What to send the engine: the target (path and query), the body, whether the answer
    becomes a raw stream (an attach or exec start: the Upgrade headers pass), and what reads
    (and may rewrite) the answer's body before the worker gets it."""

    target: str
    body: bytes = b""
    upgrade: bool = False
    after: AfterAnswer | None = None


@dataclass(frozen=True)
class _Asked:
    caller: str
    route: Route
    query: list[tuple[str, str]]
    request: Request

    def param(self, name: str) -> str:
        return next((value for key, value in self.query if key == name), "")

    def target(self, path: str) -> str:
        query = urlencode(self.query, quote_via=quote)
        return self.route.path(path) + (f"?{query}" if query else "")


class Gate:
    """Decides each request of an authenticated caller."""

    def __init__(self, engine: Engine, holdings: Holdings, limits: Limits) -> None:
        self._engine = engine
        self._holdings = holdings
        self._limits = limits
        handlers: dict[str, Callable[[_Asked], Awaitable[Forward]]] = {
            "ping": self._read_only, "version": self._read_only, "info": self._read_only,
            "create": self._create, "list": self._list,
            "rename": self._rename, "exec": self._exec, "exec.start": self._on_exec,
            "exec.resize": self._on_exec, "exec.inspect": self._on_exec,
        }  # fmt: skip
        handlers.update(dict.fromkeys(_CONTAINER_PATHS, self._on_container))
        self._handlers = handlers

    async def decide(self, caller: str, request: Request, found: Route) -> Forward:
        """What to forward for `caller`'s `request` on route `found`; `Refused` if it may not
        pass."""
        if request.body and found.name not in _WITH_BODY:
            raise Refused(f"{found.name} takes no body", 400)
        asked = _Asked(caller, found, _query(request.query, found.name), request)
        return await self._handlers[found.name](asked)

    async def _read_only(self, asked: _Asked) -> Forward:
        return Forward(asked.target(asked.request.path[len(asked.route.version) :]))

    async def _create(self, asked: _Asked) -> Forward:
        if asked.query:
            raise Refused("a sandbox's container is not named at its creation")
        checked = check_create(asked.request.body, asked.caller, self._limits)
        if checked.image != self._limits.image:
            await self._check_image(checked.image)

        def made(status: int, body: bytes) -> bytes:
            if status == 201:
                self._holdings.made(orjson.loads(body)["Id"], asked.caller)
            return body

        return Forward(asked.target("/containers/create"), checked.body, after=made)

    async def _check_image(self, image: str) -> None:
        """Refuse an image other than the sandbox's, named by id or digest or tag."""
        if not set(image) <= _IMAGE_REF:
            raise Refused(f"Image {image[:80]!r} is not the sandbox image")
        mine, theirs = self._limits.image, image
        ids = [await self._image_id(name) for name in (mine, theirs)]
        if ids[1] is None or ids[0] != ids[1]:
            raise Refused(f"Image {image!r} is not the sandbox image ({mine})")

    async def _image_id(self, image: str) -> str | None:
        status, found = await self._engine.call("GET", f"/images/{quote(image, safe='/:@')}/json")
        return found.get("Id") if status == 200 and isinstance(found, dict) else None

    async def _list(self, asked: _Asked) -> Forward:
        def own_only(status: int, body: bytes) -> bytes:
            if status != 200:
                return body
            listed: list[dict[str, Any]] = orjson.loads(body)
            return orjson.dumps([c for c in listed if _owner(c) == asked.caller])

        return Forward(asked.target("/containers/json"), after=own_only)

    async def _on_container(self, asked: _Asked) -> Forward:
        held = await self._holdings.of(asked.route.ref)
        name = asked.route.name
        if held.owner != asked.caller:
            held = await self._peer(asked, held)
        target = asked.target(f"/containers/{held.container}{_CONTAINER_PATHS[name]}")
        if name == "remove":
            if asked.param("link") not in _FALSE:
                raise Refused("a container's links may not be removed (link)")
            return Forward(target, after=self._forgetting(held.container))
        return Forward(target, asked.request.body, upgrade=name == "attach")

    async def _peer(self, asked: _Asked, held: Holding) -> Holding:
        """What a worker may do to a container it does not own: look at a handed-off one,
        and take it over by attaching (`ownership`, rule 3)."""
        if held.handed_off and asked.route.name == "inspect":
            return held
        if held.handed_off and asked.route.name == "attach":
            return await self._holdings.take_over(held.container, asked.caller)
        raise Refused(f"container {asked.route.ref} is not this worker's")

    async def _rename(self, asked: _Asked) -> Forward:
        held = await self._own(asked.caller, asked.route.ref)
        if asked.param("name") != held.handoff_name:
            raise Refused(f"a worker may rename its container only to {held.handoff_name}")
        target = asked.target(f"/containers/{held.container}/rename")

        def handed_off(status: int, body: bytes) -> bytes:
            self._holdings.forget(held.container)
            if status == 204:
                log.info("handed off", container=held.container[:12], maker=asked.caller)
            return body

        return Forward(target, after=handed_off)

    async def _exec(self, asked: _Asked) -> Forward:
        held = await self._own(asked.caller, asked.route.ref)
        check_exec(asked.request.body, self._limits.user)

        def made(status: int, body: bytes) -> bytes:
            if status == 201:
                self._holdings.exec_made(orjson.loads(body)["Id"], held.container)
            return body

        target = asked.target(f"/containers/{held.container}/exec")
        return Forward(target, asked.request.body, after=made)

    async def _on_exec(self, asked: _Asked) -> Forward:
        container = await self._holdings.container_of_exec(asked.route.ref)
        await self._own(asked.caller, container)
        name = asked.route.name
        if name == "exec.start":
            check_exec_start(asked.request.body)
        tail = {"exec.start": "/start", "exec.resize": "/resize", "exec.inspect": "/json"}[name]
        target = asked.target(f"/exec/{asked.route.ref}{tail}")
        return Forward(target, asked.request.body, upgrade=name == "exec.start")

    async def _own(self, caller: str, ref: str) -> Holding:
        held = await self._holdings.of(ref)
        if held.owner != caller:
            raise Refused(f"container {ref} is not this worker's")
        return held

    def _forgetting(self, container: str) -> AfterAnswer:
        def forget(status: int, body: bytes) -> bytes:
            self._holdings.forget(container)
            return body

        return forget


def _query(text: str, name: str) -> list[tuple[str, str]]:
    try:
        pairs = parse_qsl(text, keep_blank_values=True, strict_parsing=bool(text))
    except ValueError:
        raise Refused("the query is malformed", 400) from None
    keys = [key for key, _ in pairs]
    if stray := sorted(set(keys) - _QUERY[name]):
        raise Refused(f"{name} takes no query parameter {', '.join(stray)}")
    if len(set(keys)) != len(keys):
        raise Refused("a query parameter is given twice", 400)
    return pairs


def _owner(listed: dict[str, Any]) -> str:
    names = listed.get("Names") or [""]
    return holding(listed.get("Id", ""), names[0], listed.get("Labels")).owner
