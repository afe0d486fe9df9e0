"""The server-side request guard: an httpx transport that connects only where an
`AddressPolicy` allows.

Each new connection resolves its host once, checks every address it got, and connects to a
checked address itself, so no second lookup can slip another address in between the check
and the connection (DNS rebinding). The URL keeps its host name, so the ``Host`` header and
TLS's SNI and certificate check are the name's. A redirect to another host opens a new
connection, which is checked the same way. A proxy would hide the real target, so none is used.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator
from contextlib import contextmanager
from ipaddress import ip_address
from typing import Protocol

import httpcore
import httpx

from taskyard.agentkit.actions.web.addresses import AddressPolicy, IPAddress
from taskyard.agentkit.actions.web.errors import BlockedAddress

__all__ = [
    "GuardedNetwork",
    "GuardedTransport",
    "Resolver",
    "SystemResolver",
    "checked_addresses",
]


class Resolver(Protocol):
    """Names to addresses; raises `OSError` for a name that does not resolve."""

    async def resolve(self, host: str, port: int) -> list[IPAddress]: ...


class SystemResolver:
    """The operating system's resolver: DNS, /etc/hosts, and every numeric spelling it accepts
    (``2130706433``, ``0x7f.1``), so the policy judges what a connection would really reach."""

    async def resolve(self, host: str, port: int) -> list[IPAddress]:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        return list(dict.fromkeys(ip_address(info[4][0]) for info in infos))


async def checked_addresses(
    policy: AddressPolicy, resolver: Resolver, host: str, port: int
) -> list[IPAddress]:
    """Every address `host` resolves to, once the policy allows them all; raises
    `BlockedAddress` if it refuses one (it may be the one picked), `OSError` if none resolve."""
    addresses = await resolver.resolve(host, port)
    for address in addresses:
        reason = policy.refusal(address)
        if reason is not None:
            raise BlockedAddress(host, address, reason)
    return addresses


class GuardedNetwork(httpcore.AsyncNetworkBackend):
    """TCP connections to policy-checked addresses only, made by `inner` (anyio by default)."""

    def __init__(
        self,
        policy: AddressPolicy,
        resolver: Resolver | None = None,
        inner: httpcore.AsyncNetworkBackend | None = None,
    ) -> None:
        self.policy = policy
        self.resolver = resolver or SystemResolver()
        self.inner = inner or httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = await self._checked(host, port)
        failure: Exception = httpcore.ConnectError(f"{host} has no address")
        for address in addresses:  # the next one when an address does not answer
            try:
                return await self.inner.connect_tcp(
                    str(address), port, timeout, local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        raise failure

    async def _checked(self, host: str, port: int) -> list[IPAddress]:
        try:
            return await checked_addresses(self.policy, self.resolver, host, port)
        except OSError as exc:
            raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from exc

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("unix sockets are never opened")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class GuardedTransport(httpx.AsyncBaseTransport):
    """httpx over a connection pool whose connections all go through a `GuardedNetwork`.

    httpx's own transport cannot be handed a network backend, hence this one; like httpx's, it
    raises httpx's errors, never httpcore's.
    """

    def __init__(self, network: GuardedNetwork, ssl_context: ssl.SSLContext) -> None:
        self._pool = httpcore.AsyncConnectionPool(ssl_context=ssl_context, network_backend=network)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        assert isinstance(request.stream, AsyncIterable)
        target = httpcore.URL(
            scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path
        )
        sent = httpcore.Request(
            request.method, target, headers=request.headers.raw, content=request.stream,
            extensions=request.extensions,
        )  # fmt: skip
        with _httpx_errors(request):
            response = await self._pool.handle_async_request(sent)
        assert isinstance(response.stream, AsyncIterable)
        return httpx.Response(
            response.status,
            headers=response.headers,
            stream=_Body(response.stream, request),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._pool.aclose()


class _Body(httpx.AsyncByteStream):
    def __init__(self, stream: AsyncIterable[bytes], request: httpx.Request) -> None:
        self.stream = stream
        self.request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _httpx_errors(self.request):
            async for chunk in self.stream:
                yield chunk

    async def aclose(self) -> None:
        close = getattr(self.stream, "aclose", None)
        if close is not None:
            await close()


_HTTPX_ERRORS: dict[type[Exception], type[httpx.TransportError]] = {
    httpcore.ConnectTimeout: httpx.ConnectTimeout,
    httpcore.ReadTimeout: httpx.ReadTimeout,
    httpcore.WriteTimeout: httpx.WriteTimeout,
    httpcore.PoolTimeout: httpx.PoolTimeout,
    httpcore.ConnectError: httpx.ConnectError,
    httpcore.ReadError: httpx.ReadError,
    httpcore.WriteError: httpx.WriteError,
    httpcore.RemoteProtocolError: httpx.RemoteProtocolError,
    httpcore.LocalProtocolError: httpx.LocalProtocolError,
    httpcore.UnsupportedProtocol: httpx.UnsupportedProtocol,
}


@contextmanager
def _httpx_errors(request: httpx.Request) -> Iterator[None]:
    try:
        yield
    except tuple(_HTTPX_ERRORS) as exc:
        mapped = next(ours for theirs, ours in _HTTPX_ERRORS.items() if isinstance(exc, theirs))
        raise mapped(str(exc), request=request) from exc
