"""Fixtures for the browser tests: fake webs on two loopback addresses, and fetchers."""

from __future__ import annotations

from collections.abc import Iterator
from ipaddress import ip_network

import pytest
from fake_web import FakeWeb, serve_fake_web

from taskyard.agentkit.actions.web import AddressPolicy, PageFetcher


@pytest.fixture
def web() -> Iterator[FakeWeb]:
    """The search API and pages on 127.0.0.1."""
    with serve_fake_web("127.0.0.1") as served:
        yield served


@pytest.fixture
def secret(web: FakeWeb) -> Iterator[FakeWeb]:
    """A server the guard must keep the browser away from: on 127.0.0.2, at the same port as
    `web`, so a connection that went to the wrong address of a name would land here."""
    with serve_fake_web("127.0.0.2", port=int(web.url.rsplit(":", 1)[1])) as served:
        yield served


@pytest.fixture
def own_pages() -> AddressPolicy:
    """The guard with one exception: 127.0.0.1, where the tests' own pages are. 127.0.0.2
    stays refused, as every other loopback or private address does."""
    return AddressPolicy(allowed_networks=(ip_network("127.0.0.1/32"),))


@pytest.fixture
def fetcher(own_pages: AddressPolicy) -> PageFetcher:
    return PageFetcher(own_pages, timeout_s=5, max_bytes=256 * 1024)
