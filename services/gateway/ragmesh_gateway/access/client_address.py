"""Who sent a request, as far as the request itself shows: the rate-limit key, known before auth.

A request that shows a bearer token spends the budget of that token (:func:`bearer_key`); one
without a token spends the budget of its client address (:func:`client_key`).

``X-Forwarded-For`` is only believed when the direct peer is a trusted proxy (opt-in): the list is
walked from the right, each hop trusted only while the address that reported it is a trusted
proxy. A client can prepend anything it likes to the header, but it cannot get past the last
trusted hop. RFC 7239 ``Forwarded`` is not parsed: proxies that set only X-Forwarded-For would
pass a client-written ``Forwarded`` through untouched.

IPv6 clients are keyed by their /64 network, the block a single subscriber usually holds; keying
by full address would let one host rotate through 2**64 buckets.
"""

from __future__ import annotations

import hashlib
import ipaddress
from collections.abc import Iterable, Mapping

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

UNKNOWN_CLIENT = "ip:unknown"


def parse_networks(specs: Iterable[str]) -> list[IPNetwork]:
    """``["10.0.0.0/8", "127.0.0.1"]`` -> networks (a bare address is a /32 or /128)."""
    return [ipaddress.ip_network(spec.strip(), strict=False) for spec in specs if spec.strip()]


def parse_address(value: str) -> IPAddress | None:
    """An address from a peer or header value: ``1.2.3.4``, ``1.2.3.4:80``, ``[::1]:80``, ``::1``."""
    value = value.strip().strip('"')
    if value.startswith("["):
        value = value[1:value.find("]")] if "]" in value else ""
    elif value.count(":") == 1:  # IPv4 with a port; IPv6 has at least two colons
        value = value.split(":", 1)[0]
    try:
        address = ipaddress.ip_address(value.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _is_trusted(address: IPAddress, trusted: list[IPNetwork]) -> bool:
    return any(address.version == net.version and address in net for net in trusted)


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is not None:
        return value
    lowered = name.lower()
    for key, item in headers.items():
        if key.lower() == lowered:
            return item
    return None


def client_address(remote_addr: str | None, headers: Mapping[str, str],
                   trusted_proxies: Iterable[IPNetwork | str] = (),
                   *, header: str = "x-forwarded-for") -> IPAddress | None:
    trusted = [net if not isinstance(net, str) else ipaddress.ip_network(net, strict=False)
               for net in trusted_proxies]
    current = parse_address(remote_addr or "")
    if current is None or not trusted:
        return current
    forwarded = _header(headers, header)
    if not forwarded:
        return current
    for hop in reversed(forwarded.split(",")):
        if not _is_trusted(current, trusted):
            break
        previous = parse_address(hop)
        if previous is None:  # garbage after a trusted hop: stop at the last address we can vouch for
            break
        current = previous
    return current


def client_key(remote_addr: str | None, headers: Mapping[str, str],
               trusted_proxies: Iterable[IPNetwork | str] = (), *, header: str = "x-forwarded-for") -> str:
    """Rate-limit key of an anonymous caller: ``ip:<address>`` (IPv6 as ``ip:<network>/64``)."""
    address = client_address(remote_addr, headers, trusted_proxies, header=header)
    if address is None:
        return UNKNOWN_CLIENT
    if isinstance(address, ipaddress.IPv6Address):
        return f"ip:{ipaddress.ip_network(f'{address}/64', strict=False)}"
    return f"ip:{address}"


def bearer_key(authorization: str) -> str:
    """Rate-limit key of a request with an ``Authorization`` header, before the token is checked.

    A hash of the whole token, not its public id: whoever knows a token id (it is in logs) cannot
    drain that token's budget with wrong secrets. "Bearer x" and "x" are the same token.
    """
    value = authorization.strip()
    if value[:7].lower() == "bearer ":
        value = value[7:].strip()
    return "bearer:" + hashlib.sha256(value.encode("utf-8", "surrogateescape")).hexdigest()[:32]
