"""Reading one page for the model: a bounded, guarded GET, reduced to readable text.

Bounded: the whole read (resolving, connecting, redirects, body) ends within `timeout_s`; at
most `max_redirects` hops are followed, and no redirect or error body is read; at most
`max_bytes` of body are read (after decompression, so a small compressed answer cannot blow
up), then the connection is dropped and the page is marked as cut. Guarded: every connection
goes through `GuardedTransport`. Every failure is an `ActionError` the model can read.
"""

from __future__ import annotations

import asyncio
import ssl
import zlib
from typing import Protocol

import httpcore
import httpx
from pydantic import BaseModel, ConfigDict

from taskyard.agentkit.actions.base import ActionError
from taskyard.agentkit.actions.web.addresses import AddressPolicy
from taskyard.agentkit.actions.web.errors import WebFailure
from taskyard.agentkit.actions.web.guard import GuardedNetwork, GuardedTransport, Resolver
from taskyard.agentkit.actions.web.readable import readable_html

__all__ = ["Page", "PageFetcher"]

_HTML_TYPES = ("text/html", "application/xhtml+xml", "")  # no type: most likely HTML
_TEXT_TYPES = ("text/", "application/json", "application/xml")
_HEADERS = {
    "User-Agent": "taskyard-browser/0.1",
    "Accept": "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5",
    "Accept-Encoding": "gzip, deflate",  # what `_read_capped` can decompress with a bound
}
_GZIP_OR_ZLIB = 32 + zlib.MAX_WBITS  # zlib detects which of the two headers the body has


class Page(BaseModel):
    """A page as read: its address after redirects, its title and its readable text."""

    model_config = ConfigDict(frozen=True)

    url: str
    title: str = ""
    text: str = ""
    truncated: bool = False  # the body went past the size cap; the rest was not read


class _Decompressor(Protocol):
    def decompress(self, data: bytes, max_length: int = 0, /) -> bytes: ...


class PageFetcher:
    """Fetches pages through the `policy`'s guard. Names are resolved by `resolver`,
    connections made by `network`, certificates checked by `ssl_context` (the system's CAs by
    default): tests hand in their own."""

    def __init__(
        self,
        policy: AddressPolicy,
        *,
        timeout_s: float = 15.0,
        max_bytes: int = 2 * 1024 * 1024,
        max_redirects: int = 5,
        resolver: Resolver | None = None,
        network: httpcore.AsyncNetworkBackend | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.network = GuardedNetwork(policy, resolver, network)
        self.timeout_s = timeout_s
        self.max_bytes = max_bytes
        self.max_redirects = max_redirects
        self.ssl_context = ssl_context or httpx.create_ssl_context(trust_env=False)

    async def fetch(self, url: str) -> Page:
        """The page at `url` (http or https) as readable text."""
        if not url.startswith(("http://", "https://")):
            raise ActionError(f"can only open http(s) URLs, not {url!r}")
        try:
            async with asyncio.timeout(self.timeout_s):
                return await self._follow(url)
        except (TimeoutError, httpx.TimeoutException) as exc:
            raise WebFailure(f"{url} took longer than {self.timeout_s:g} s to read") from exc
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise WebFailure(f"could not read {url}: {exc}") from exc
        except zlib.error as exc:
            raise WebFailure(f"{url} sent a body that does not decompress: {exc}") from exc

    async def _follow(self, url: str) -> Page:
        transport = GuardedTransport(self.network, self.ssl_context)
        async with httpx.AsyncClient(
            transport=transport, headers=_HEADERS, timeout=self.timeout_s, trust_env=False
        ) as client:
            request = client.build_request("GET", url)
            for _ in range(self.max_redirects + 1):
                response = await client.send(request, stream=True)
                try:
                    if response.next_request is None:
                        return await self._page(response)
                    request = response.next_request  # its body is never read
                finally:
                    await response.aclose()
        raise WebFailure(f"{url} redirected more than {self.max_redirects} times")

    async def _page(self, response: httpx.Response) -> Page:
        where = str(response.url)
        if response.is_error:
            raise WebFailure(f"{where} answered HTTP {response.status_code}")
        kind = response.headers.get("content-type", "").partition(";")[0].strip().lower()
        is_html = kind in _HTML_TYPES
        if not is_html and not kind.startswith(_TEXT_TYPES):
            raise ActionError(f"{where} is {kind}, which cannot be shown as text")
        body, truncated = await _read_capped(response, self.max_bytes)
        await response.aclose()  # hang up before the extraction's CPU work
        charset = response.charset_encoding
        if not is_html:
            return Page(url=where, text=_decode(body, charset), truncated=truncated)
        # Without a declared charset, the extractor reads the page's own <meta charset>.
        html = _decode(body, charset) if charset else body
        readable = await asyncio.to_thread(readable_html, html, where)  # CPU work off the loop
        return Page(url=where, title=readable.title, text=readable.text, truncated=truncated)


async def _read_capped(response: httpx.Response, limit: int) -> tuple[bytes, bool]:
    """At most `limit` bytes of the decoded body, and whether there was more."""
    inflate = _decompressor(response)
    body = bytearray()
    async for raw in response.aiter_raw():
        body += inflate.decompress(raw, limit + 1 - len(body)) if inflate else raw
        if len(body) > limit:
            return bytes(body[:limit]), True
    return bytes(body), False


def _decompressor(response: httpx.Response) -> _Decompressor | None:
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding in ("identity", ""):
        return None
    if encoding in ("gzip", "x-gzip", "deflate"):
        return zlib.decompressobj(_GZIP_OR_ZLIB)
    raise ActionError(f"{response.url} is compressed as {encoding!r}, which cannot be read")


def _decode(body: bytes, charset: str | None) -> str:
    try:
        return body.decode(charset or "utf-8", "replace")
    except LookupError:  # a charset Python does not know
        return body.decode("utf-8", "replace")
