"""The address policy as a pure decision: what the guard refuses by default, what it lets
through when an operator allows it."""

from __future__ import annotations

from ipaddress import ip_address, ip_network

import pytest

from taskyard.agentkit.actions.web import AddressPolicy


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "a loopback address"),
        ("127.8.9.10", "a loopback address"),
        ("::1", "a loopback address"),
        ("169.254.169.254", "a link-local address"),
        ("fe80::1", "a link-local address"),
        ("fe80::1%2", "a link-local address"),
        ("10.0.0.5", "a private address"),
        ("172.16.0.1", "a private address"),
        ("172.31.255.254", "a private address"),
        ("192.168.1.1", "a private address"),
        ("fc00::1", "a private address"),
        ("fd12:3456::1", "a private address"),
        ("100.64.0.1", "a non-public address"),  # carrier-grade NAT
        ("0.0.0.0", "an unspecified address"),
        ("::", "an unspecified address"),
        ("224.0.0.1", "a multicast address"),
        ("ff02::1", "a multicast address"),
        ("2001:db8::1", "a private address"),  # documentation
        # IPv6 spellings of an IPv4 address are judged by that IPv4 address.
        ("::ffff:127.0.0.1", "a loopback address (it carries 127.0.0.1)"),
        ("::ffff:10.1.2.3", "a private address (it carries 10.1.2.3)"),
        ("::ffff:169.254.169.254", "a link-local address (it carries 169.254.169.254)"),
        ("::127.0.0.1", "a loopback address (it carries 127.0.0.1)"),
        ("2002:7f00:1::", "a loopback address (it carries 127.0.0.1)"),  # 6to4
        ("64:ff9b::a00:1", "a private address (it carries 10.0.0.1)"),  # NAT64
    ],
)
def test_the_default_refuses_every_address_that_is_not_public(address: str, reason: str) -> None:
    assert AddressPolicy().refusal(ip_address(address)) == reason


@pytest.mark.parametrize(
    "address", ["93.184.216.34", "8.8.8.8", "2606:4700::1111", "::ffff:8.8.8.8", "2002:808:808::"]
)
def test_public_addresses_pass(address: str) -> None:
    assert AddressPolicy().refusal(ip_address(address)) is None


def test_allowed_networks_open_only_themselves() -> None:
    policy = AddressPolicy(allowed_networks=(ip_network("10.20.0.0/16"), ip_network("::1/128")))
    assert policy.refusal(ip_address("10.20.3.4")) is None
    assert policy.refusal(ip_address("::ffff:10.20.3.4")) is None  # the same address
    assert policy.refusal(ip_address("::1")) is None
    assert policy.refusal(ip_address("10.21.0.1")) == "a private address"
    assert policy.refusal(ip_address("127.0.0.1")) == "a loopback address"


def test_allow_private_opens_everything() -> None:
    policy = AddressPolicy(allow_private=True)
    assert all(
        policy.refusal(ip_address(a)) is None for a in ("127.0.0.1", "169.254.169.254", "fd00::1")
    )
