"""Which addresses the browser may connect to: by default, only globally routable ones.

A page the model asks for must not reach into the tool worker's own network: loopback,
link-local (cloud metadata lives at 169.254.169.254), private and shared ranges, and the IPv6
spellings that carry such an IPv4 address inside them (mapped ``::ffff:a.b.c.d``, compatible
``::a.b.c.d``, 6to4 ``2002::/16``, NAT64 ``64:ff9b::/96``). An operator lifts the rule for
named networks (an intranet wiki) or entirely (tests, a laptop).
"""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network

__all__ = ["AddressPolicy", "IPAddress", "IPNetwork"]

IPAddress = IPv4Address | IPv6Address
IPNetwork = IPv4Network | IPv6Network

_NAT64 = IPv6Network("64:ff9b::/96")
_IPV4_COMPATIBLE = IPv6Network("::/96")


@dataclass(frozen=True)
class AddressPolicy:
    """Refuses every address that is not globally routable, except `allowed_networks`
    (or every address at all when `allow_private`)."""

    allow_private: bool = False
    allowed_networks: tuple[IPNetwork, ...] = ()

    def refusal(self, address: IPAddress) -> str | None:
        """Why `address` may not be connected to (e.g. "a loopback address"), or None."""
        if self.allow_private:
            return None
        embedded = _embedded_ipv4(address)
        forms = (address,) if embedded is None else (address, embedded)
        if any(form in network for form in forms for network in self.allowed_networks):
            return None
        kind = _kind(embedded if embedded is not None else address)
        if kind is None:
            return None
        return kind if embedded is None else f"{kind} (it carries {embedded})"


def _embedded_ipv4(address: IPAddress) -> IPv4Address | None:
    """The IPv4 address an IPv6 address stands for, where a connection would reach it."""
    if not isinstance(address, IPv6Address) or address.is_loopback or address.is_unspecified:
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64 or address in _IPV4_COMPATIBLE:
        return IPv4Address(int(address) & 0xFFFF_FFFF)
    return None


def _kind(address: IPAddress) -> str | None:
    # The specific kinds first: `is_private` also covers loopback and link-local.
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_unspecified:
        return "an unspecified address"
    if address.is_multicast:
        return "a multicast address"
    if address.is_private:
        return "a private address"
    if not address.is_global:
        return "a non-public address"
    return None
