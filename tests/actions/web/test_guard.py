"""The server-side request guard, through real page reads: what the default refuses however
it is spelled, redirected or resolved, and that it checks the address it really connects to.

Loopback targets are real servers (127.0.0.1, 127.0.0.2); every other non-public address is
refused before any connection, which a backend that refuses to connect proves (no packet ever
leaves for 10/8, 169.254/16 and the like).
"""

from __future__ import annotations

import re
import ssl
import subprocess
from collections.abc import Iterable
from ipaddress import ip_address
from pathlib import Path

import httpcore
import pytest
from fake_web import FakeWeb, serve_fake_web

from taskyard.agentkit.actions.web import AddressPolicy, BlockedAddress, PageFetcher, WebFailure
from taskyard.agentkit.actions.web.addresses import IPAddress


class NoConnections(httpcore.AsyncNetworkBackend):
    """Records every connection the guard lets through, and makes none."""

    def __init__(self) -> None:
        self.attempts: list[tuple[str, int]] = []

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        self.attempts.append((host, port))
        raise httpcore.ConnectError("this test makes no connections")


class ScriptedResolver:
    """Answers each name from a list of answers, one per lookup (the last one repeats)."""

    def __init__(self, answers: dict[str, list[list[str]]]) -> None:
        self.answers = answers
        self.lookups: list[str] = []

    async def resolve(self, host: str, port: int) -> list[IPAddress]:
        self.lookups.append(host)
        answers = self.answers[host]
        answer = answers[min(len(self.lookups) - 1, len(answers) - 1)]
        return [ip_address(a) for a in answer]


def _port(web: FakeWeb) -> int:
    return int(web.url.rsplit(":", 1)[1])


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A self-signed certificate for pages.example only, and its key."""
    where: Path = tmp_path_factory.mktemp("tls")
    cert, key = str(where / "cert.pem"), str(where / "key.pem")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=pages.example",
         "-addext", "subjectAltName=DNS:pages.example"],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip
    return cert, key


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",
        "localhost",  # a name that resolves there
        "2130706433",  # decimal
        "0x7f000001",  # hexadecimal
        "0x7f.1",
        "017700000001",  # octal
        "127.1",
        "[::ffff:127.0.0.1]",  # IPv4-mapped IPv6
        "[::ffff:7f00:1]",
        "[::1]",
    ],
)
async def test_the_default_refuses_loopback_however_it_is_spelled(web: FakeWeb, host: str) -> None:
    fetcher = PageFetcher(AddressPolicy(), timeout_s=5)
    with pytest.raises(BlockedAddress, match="a loopback address") as refused:
        await fetcher.fetch(f"http://{host}:{_port(web)}/docs/redis")
    assert str(refused.value).startswith("refused to connect: ")
    assert web.requests == []


async def test_an_octal_dotted_spelling_is_not_even_a_url(web: FakeWeb) -> None:
    fetcher = PageFetcher(AddressPolicy(), timeout_s=5)
    with pytest.raises(WebFailure, match="Invalid IPv4 address"):
        await fetcher.fetch(f"http://0177.0.0.1:{_port(web)}/docs/redis")
    assert web.requests == []


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://10.0.0.5/", "a private address"),
        ("http://172.16.0.1:8080/", "a private address"),
        ("http://192.168.1.1/", "a private address"),
        ("http://169.254.169.254/latest/meta-data/", "a link-local address"),
        ("http://[fe80::1]/", "a link-local address"),
        ("http://[fc00::1]/", "a private address"),
        ("http://[fd00:ab::7]/", "a private address"),
        ("http://[::ffff:10.0.0.5]/", "a private address (it carries 10.0.0.5)"),
        ("http://[::ffff:a9fe:a9fe]/", "a link-local address (it carries 169.254.169.254)"),
        ("http://0xa9fea9fe/", "a link-local address"),  # 169.254.169.254
        ("http://0.0.0.0/", "an unspecified address"),
        ("https://10.1.1.1/", "a private address"),
    ],
)
async def test_private_and_link_local_addresses_are_refused_before_any_connection(
    url: str, reason: str
) -> None:
    network = NoConnections()
    fetcher = PageFetcher(AddressPolicy(), timeout_s=5, network=network)
    with pytest.raises(BlockedAddress) as refused:
        await fetcher.fetch(url)
    assert refused.value.reason == reason
    assert network.attempts == []


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (["10.1.2.3"], "a private address"),
        (["169.254.169.254"], "a link-local address"),
        (["fd00::5"], "a private address"),
        (["::ffff:192.168.0.9"], "a private address (it carries 192.168.0.9)"),
        # One bad address refuses the name: the connection could pick any of them.
        (["93.184.216.34", "10.1.2.3"], "a private address"),
    ],
)
async def test_names_are_judged_by_the_addresses_they_resolve_to(
    answer: list[str], reason: str
) -> None:
    network = NoConnections()
    resolver = ScriptedResolver({"intranet.example": [answer]})
    fetcher = PageFetcher(AddressPolicy(), timeout_s=5, resolver=resolver, network=network)
    with pytest.raises(BlockedAddress, match=re.escape("intranet.example resolves to")) as refused:
        await fetcher.fetch("https://intranet.example/wiki")
    assert refused.value.reason == reason
    assert network.attempts == []


@pytest.mark.parametrize(
    "target",
    [
        "http://127.0.0.2:{port}/docs/redis",
        "http://[::ffff:127.0.0.2]:{port}/docs/redis",
        "http://2130706434:{port}/docs/redis",  # 127.0.0.2, decimal
    ],
)
async def test_a_redirect_to_a_refused_address_is_not_followed(
    fetcher: PageFetcher, web: FakeWeb, secret: FakeWeb, target: str
) -> None:
    to = target.format(port=_port(secret))
    with pytest.raises(BlockedAddress, match=re.escape("127.0.0.2")):
        await fetcher.fetch(f"{web.url}/redirect?to={to}")
    assert web.paths() == [f"/redirect?to={to}"]
    assert secret.requests == []


async def test_a_redirect_to_an_allowed_address_is_followed(
    fetcher: PageFetcher, web: FakeWeb
) -> None:
    page = await fetcher.fetch(f"{web.url}/redirect?to=/docs/celery")
    assert page.url == f"{web.url}/docs/celery"
    assert page.text == "Tasks run on workers."


async def test_the_address_checked_is_the_address_connected_to(
    own_pages: AddressPolicy, web: FakeWeb, secret: FakeWeb
) -> None:
    # DNS rebinding: the first lookup answers an allowed address, every later one a refused
    # address where another server listens on the same port. Checking one lookup and
    # connecting by another would reach that server.
    resolver = ScriptedResolver({"rebind.example": [["127.0.0.1"], ["127.0.0.2"]]})
    fetcher = PageFetcher(own_pages, timeout_s=5, resolver=resolver)
    url = f"http://rebind.example:{_port(web)}/docs/celery"
    page = await fetcher.fetch(url)
    assert page.text == "Tasks run on workers."
    assert resolver.lookups == ["rebind.example"]
    assert [r.host for r in web.requests] == [f"rebind.example:{_port(web)}"]  # the name, kept
    with pytest.raises(BlockedAddress, match=re.escape("rebind.example resolves to 127.0.0.2")):
        await fetcher.fetch(url)  # a new read resolves again, and is judged again
    assert secret.requests == []


async def test_allow_private_opens_loopback(web: FakeWeb) -> None:
    fetcher = PageFetcher(AddressPolicy(allow_private=True), timeout_s=5)
    page = await fetcher.fetch(f"http://localhost:{_port(web)}/docs/celery")
    assert page.text == "Tasks run on workers."


async def test_proxies_from_the_environment_are_not_used(
    fetcher: PageFetcher, web: FakeWeb, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A proxy would make the connection for us, to wherever the URL says, unchecked.
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    page = await fetcher.fetch(f"{web.url}/docs/celery")
    assert page.text == "Tasks run on workers."


async def test_https_keeps_the_name_for_sni_and_the_certificate_check(
    own_pages: AddressPolicy, certificate: tuple[str, str]
) -> None:
    cert, key = certificate
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    server_names: list[str | None] = []
    tls.sni_callback = lambda _sock, name, _ctx: server_names.append(name)
    with serve_fake_web("127.0.0.1", tls=tls) as site:
        port = _port(site)
        resolver = ScriptedResolver(
            {name: [["127.0.0.1"]] for name in ("pages.example", "127.0.0.1")}
        )
        trusting = ssl.create_default_context(cafile=cert)
        fetcher = PageFetcher(own_pages, timeout_s=5, resolver=resolver, ssl_context=trusting)
        page = await fetcher.fetch(f"https://pages.example:{port}/docs/celery")
        assert page.text == "Tasks run on workers."
        assert server_names == ["pages.example"]  # connected to 127.0.0.1, introduced by name
        assert [r.host for r in site.requests] == [f"pages.example:{port}"]
        with pytest.raises(WebFailure, match="certificate verify failed"):
            await fetcher.fetch(f"https://127.0.0.1:{port}/docs/celery")  # not the cert's name
