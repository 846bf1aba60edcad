"""The client's address behind a trusted proxy (``--trusted-proxies CIDR,...``).

A TLS-terminating ingress connects to the server itself: without this, every client behind it
would be one address to the per-address limits and the logs. When the direct peer of a call is
in one of the trusted networks, and only then, the client's address is taken from
``x-forwarded-for``: its right-most entry that is not itself a trusted proxy (each proxy appends
the address it received the connection from, so the entries left of that one are whatever the
client wrote, never believed). A peer outside the networks is the client, whatever it sends.
The result is named as gRPC names a peer (``ipv4:203.0.113.7:PORT``, the port being the direct
connection's), so that everything keyed by the peer (per-address limits, per-connection caps,
the relayed ``Caller``, the logs) uses it unchanged.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

FORWARDED_FOR = "x-forwarded-for"
MAX_ENTRIES = 32
"""``x-forwarded-for`` entries looked at, from the right (a longer chain is cut there)."""


def parse_networks(text: str) -> tuple[Network, ...]:
    """``CIDR,CIDR,...`` (a bare address is a /32 or /128); ``ValueError`` saying which entry
    is not one."""
    found = []
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        try:
            found.append(ipaddress.ip_network(entry, strict=False))
        except ValueError as error:
            raise ValueError(f"--trusted-proxies: {entry!r} is not an address or a CIDR "
                             "network") from error
    return tuple(found)


def _address(text: str) -> Address | None:
    """An address as ``x-forwarded-for`` or a gRPC peer writes it (with or without a port,
    IPv6 in brackets or not); None if it is not one. IPv4-mapped IPv6 is IPv4."""
    text = text.strip()
    if text.startswith("["):
        text = text[1:].partition("]")[0]
    elif text.count(":") == 1:  # IPv4 with a port
        text = text.partition(":")[0]
    try:
        found = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(found, ipaddress.IPv6Address) and found.ipv4_mapped is not None:
        return found.ipv4_mapped
    return found


def _split_peer(peer: str) -> tuple[Address, str] | None:
    """(address, port) of a gRPC peer (``ipv4:1.2.3.4:5678``, ``ipv6:[::1]:5678``)."""
    scheme, _, rest = peer.partition(":")
    if scheme not in ("ipv4", "ipv6"):
        return None
    host, _, port = rest.rpartition(":")
    found = _address(host)
    return None if found is None else (found, port)


def peer_name(address: Address, port: str) -> str:
    """``address`` named as gRPC names a peer."""
    if isinstance(address, ipaddress.IPv6Address):
        return f"ipv6:[{address}]:{port}"
    return f"ipv4:{address}:{port}"


class TrustedProxies:
    """The networks whose ``x-forwarded-for`` is believed."""

    def __init__(self, networks: Iterable[Network] = ()) -> None:
        self.networks = tuple(networks)

    @classmethod
    def parse(cls, text: str) -> TrustedProxies:
        return cls(parse_networks(text))

    def trusted(self, address: Address) -> bool:
        return any(address in network for network in self.networks)

    def client_peer(self, peer: str, forwarded: Iterable[str]) -> str:
        """The client's peer name: ``peer`` itself unless it is a trusted proxy, else the
        right-most untrusted ``x-forwarded-for`` entry (``forwarded``: each header's value, in
        order), with ``peer``'s port. An entry that is not an address ends the walk at the
        last trusted hop (that hop is then the client, as far as anyone can tell)."""
        if not self.networks:
            return peer
        direct = _split_peer(peer)
        if direct is None or not self.trusted(direct[0]):
            return peer
        entries = [e for value in forwarded for e in value.split(",") if e.strip()]
        client = direct[0]
        for entry in reversed(entries[-MAX_ENTRIES:]):
            found = _address(entry)
            if found is None:
                break
            client = found
            if not self.trusted(found):
                break
        return peer_name(client, direct[1])
