"""The HTTP client a remote MCP server is reached with: the web tool's request guard, a size
cap on each answer, and the tenant's credential.

The `mcp` SDK speaks streamable HTTP over httpx2 (a fork of httpx with its own httpcore2),
so the guard's network backend is written here again for httpcore2; the addresses it may
reach are decided by the same `checked_addresses`. As with the web tool, each connection
resolves its host once, checks every address, and connects to a checked one; no proxy from
the environment is used.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Iterable

import httpcore2
import httpx2

from taskyard.agentkit.actions.web.addresses import AddressPolicy, IPAddress
from taskyard.agentkit.actions.web.guard import Resolver, SystemResolver, checked_addresses
from taskyard.errors import TaskyardError

__all__ = ["AnswerTooLarge", "GuardedMcpNetwork", "guarded_client"]


class AnswerTooLarge(TaskyardError):
    """A server's answer (a response body, or one event of its stream) passed the cap."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"its answer passed {limit} bytes (TASKYARD_MCP_MAX_BYTES)")
        self.limit = limit


class GuardedMcpNetwork(httpcore2.AsyncNetworkBackend):
    """TCP connections to policy-checked addresses only (`taskyard.agentkit.actions.web.guard`'s
    rule)."""

    def __init__(
        self,
        policy: AddressPolicy,
        resolver: Resolver | None = None,
        inner: httpcore2.AsyncNetworkBackend | None = None,
    ) -> None:
        self.policy = policy
        self.resolver = resolver or SystemResolver()
        self.inner = inner or httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore2.SOCKET_OPTION] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        failure: Exception = httpcore2.ConnectError(f"{host} has no address")
        for address in await self._checked(host, port):
            try:
                return await self.inner.connect_tcp(
                    str(address), port, timeout, local_address, socket_options
                )
            except (httpcore2.ConnectError, httpcore2.ConnectTimeout) as exc:
                failure = exc
        raise failure

    async def _checked(self, host: str, port: int) -> list[IPAddress]:
        try:
            return await checked_addresses(self.policy, self.resolver, host, port)
        except OSError as exc:
            raise httpcore2.ConnectError(f"cannot resolve {host}: {exc}") from exc

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore2.SOCKET_OPTION] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        raise httpcore2.ConnectError("unix sockets are never opened")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class _GuardedTransport(httpx2.AsyncHTTPTransport):
    """httpx2's own transport over a pool whose connections go through the guard, and whose
    response bodies stop at `max_bytes`. httpx2 takes no network backend, so the pool it made
    is replaced (`_pool` is what its request handling uses)."""

    def __init__(self, network: GuardedMcpNetwork, ssl_context: ssl.SSLContext, max_bytes: int):
        super().__init__(verify=ssl_context, trust_env=False)
        self._pool = httpcore2.AsyncConnectionPool(ssl_context=ssl_context, network_backend=network)
        self.max_bytes = max_bytes

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await super().handle_async_request(request)
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        response.stream = _Capped(response.stream, self.max_bytes)
        return response


class _Capped(httpx2.AsyncByteStream):
    """A body that raises `AnswerTooLarge` once it passes `limit` bytes (an event stream
    counts whole: a server that streams forever is cut too)."""

    def __init__(self, inner: httpx2.AsyncByteStream, limit: int) -> None:
        self.inner = inner
        self.limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        read = 0
        async for chunk in self.inner:
            read += len(chunk)
            if read > self.limit:
                raise AnswerTooLarge(self.limit)
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


def guarded_client(
    policy: AddressPolicy,
    *,
    timeout_s: float,
    max_bytes: int,
    headers: dict[str, str] | None = None,
    errors: list[int] | None = None,
    resolver: Resolver | None = None,
    ssl_context: ssl.SSLContext | None = None,
) -> httpx2.AsyncClient:
    """An httpx2 client for the SDK's streamable HTTP transport: guarded, capped, bounded in
    time, carrying `headers` (the credential) on every request. `errors` gets each HTTP error
    status answered (the SDK keeps only that one came)."""
    context = ssl_context or httpx2.create_ssl_context(trust_env=False)
    transport = _GuardedTransport(GuardedMcpNetwork(policy, resolver), context, max_bytes)
    seen = errors if errors is not None else []

    async def note(response: httpx2.Response) -> None:
        if response.is_error:
            seen.append(response.status_code)

    return httpx2.AsyncClient(
        transport=transport, headers=headers, timeout=timeout_s, trust_env=False,
        event_hooks={"response": [note]},
    )  # fmt: skip
