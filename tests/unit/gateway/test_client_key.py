"""Rate-limit keys, limit parsing and headers: the pure parts of the rate limiter."""

from __future__ import annotations

import pytest

from ragmesh_gateway.access.client_address import bearer_key, client_key, parse_address, parse_networks
from ragmesh_gateway.access.ratelimit import Decision, Limit, parse_limits, rate_limit_headers

PROXIES = parse_networks(["10.0.0.0/8", "127.0.0.1"])


@pytest.mark.parametrize(
    ("remote", "headers", "trusted", "expected"),
    [
        # No trusted proxies configured: the header is ignored, whatever it says.
        ("203.0.113.9", {"X-Forwarded-For": "1.1.1.1"}, [], "ip:203.0.113.9"),
        # Peer is not a trusted proxy: a client-written header is ignored.
        ("203.0.113.9", {"X-Forwarded-For": "1.1.1.1"}, PROXIES, "ip:203.0.113.9"),
        # Trusted proxy in front: the client is the hop it reported.
        ("10.1.2.3", {"x-forwarded-for": "198.51.100.7"}, PROXIES, "ip:198.51.100.7"),
        # A spoofed left-most entry is not believed: stop at the first untrusted hop from the right.
        ("10.1.2.3", {"X-Forwarded-For": "6.6.6.6, 198.51.100.7, 10.9.9.9"}, PROXIES, "ip:198.51.100.7"),
        # Garbage after a trusted hop: fall back to the last address that can be vouched for.
        ("10.1.2.3", {"X-Forwarded-For": "not-an-ip"}, PROXIES, "ip:10.1.2.3"),
        # Ports and brackets are stripped; IPv4-mapped IPv6 becomes IPv4.
        ("127.0.0.1", {"X-Forwarded-For": "198.51.100.7:4711"}, PROXIES, "ip:198.51.100.7"),
        ("::ffff:203.0.113.9", {}, [], "ip:203.0.113.9"),
        # IPv6 clients are keyed by their /64.
        ("127.0.0.1", {"X-Forwarded-For": "[2001:db8:1:2:aaaa::1]:443"}, PROXIES, "ip:2001:db8:1:2::/64"),
        ("2001:db8:1:2:ffff::9", {}, [], "ip:2001:db8:1:2::/64"),
        (None, {}, PROXIES, "ip:unknown"),
        ("", {"X-Forwarded-For": "1.1.1.1"}, PROXIES, "ip:unknown"),
    ],
)
def test_client_key(remote: str | None, headers: dict[str, str], trusted: list, expected: str) -> None:
    assert client_key(remote, headers, trusted) == expected


def test_trusted_proxies_may_be_given_as_strings() -> None:
    assert client_key("10.0.0.5", {"X-Real-Client": "192.0.2.1"}, ["10.0.0.0/8"],
                      header="X-Real-Client") == "ip:192.0.2.1"


def test_parse_address_rejects_garbage() -> None:
    assert parse_address("1.2.3") is None
    assert parse_address("[::1") is None
    assert str(parse_address("fe80::1%eth0")) == "fe80::1"


def test_bearer_key_hashes_the_whole_token() -> None:
    token = "rmk_0123456789abcdef_" + "s" * 43
    key = bearer_key(f"Bearer {token}")
    assert key.startswith("bearer:") and token not in key and "0123456789abcdef" not in key
    assert bearer_key(token) == bearer_key(f"  bearer   {token} ") == key
    # Same public id, another secret: another bucket, so a known id cannot drain a token's budget.
    assert bearer_key("rmk_0123456789abcdef_" + "t" * 43) != key
    assert bearer_key("Basic \udcff") != key  # undecodable bytes in a header still hash


def test_parse_limits() -> None:
    assert parse_limits("search=10/20, chat=0.5/2,*=5/5") == {
        "search": Limit(10.0, 20), "chat": Limit(0.5, 2), "*": Limit(5.0, 5)}
    assert parse_limits("") == {}
    for bad in ("search=10", "search=x/2", "search=0/2", "search=1/0"):
        with pytest.raises(ValueError):
            parse_limits(bad)


def test_headers_round_up_and_add_retry_after_only_when_refused() -> None:
    allowed = Decision(allowed=True, remaining=4, limit=5, retry_after_s=0.0, reset_s=0.2,
                       policy_window_s=0.5)
    assert rate_limit_headers(allowed) == {
        "RateLimit-Limit": "5", "RateLimit-Remaining": "4", "RateLimit-Reset": "1",
        "RateLimit-Policy": "5;w=1"}
    refused = Decision(allowed=False, remaining=0, limit=5, retry_after_s=2.01, reset_s=10.0,
                       policy_window_s=10.0)
    headers = rate_limit_headers(refused)
    assert headers["Retry-After"] == "3"
    assert headers["RateLimit-Reset"] == "10"
