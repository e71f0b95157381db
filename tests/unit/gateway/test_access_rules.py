"""Who may do what, and whose budget a request spends: the rules behind the access ports."""

from __future__ import annotations

import pytest

from ragmesh_common.errors import ErrorCode, RagmeshError

from ragmesh_gateway.access.adapters import RedisRateLimit
from ragmesh_gateway.access.client_address import bearer_key
from ragmesh_gateway.access.ports import Caller, RateDecision, RequestInfo, RouteClass
from ragmesh_gateway.access.ratelimit import Decision, parse_limits
from ragmesh_gateway.access.tokens import Scope


def code_of(caller: Caller, *scopes: Scope) -> ErrorCode | None:
    try:
        caller.require(*scopes)
    except RagmeshError as exc:
        return exc.code
    return None


def test_a_missing_scope_asks_anonymous_callers_for_a_token_and_refuses_tokens() -> None:
    anonymous = Caller("anonymous", scopes=frozenset({Scope.ANSWER.value}), authenticated=False)
    reader = Caller("bob", scopes=frozenset({Scope.READ.value}))
    admin = Caller("ops", scopes=frozenset({Scope.ADMIN.value}))
    local = Caller("local")  # authentication disabled: every scope
    assert code_of(anonymous, Scope.ANSWER) is None
    assert code_of(anonymous, Scope.SEARCH) is ErrorCode.UNAUTHENTICATED
    assert code_of(reader, Scope.SEARCH) is ErrorCode.PERMISSION_DENIED
    assert code_of(reader, Scope.SEARCH, Scope.READ) is None  # any one of the alternatives
    assert code_of(admin, Scope.INDEX_PROMOTE) is None and code_of(local, Scope.INDEX_BUILD) is None


class RecordingBuckets:
    """Stands in for the Redis buckets: records (limit class, sender) and admits everything."""

    def __init__(self) -> None:
        self.spent: list[tuple[str, str]] = []

    async def check(self, limit_class: str, key: str, *, cost: int = 1) -> Decision:
        self.spent.append((limit_class, key))
        return Decision(allowed=True, remaining=4, limit=5, retry_after_s=0.0, reset_s=1.0, policy_window_s=5.0)


def limiter(spec: str, **options) -> tuple[RedisRateLimit, RecordingBuckets]:
    buckets = RecordingBuckets()
    return RedisRateLimit(buckets, parse_limits(spec), **options), buckets  # type: ignore[arg-type]


TOKEN = "rmk_0123456789abcdef_" + "s" * 43
WITH_TOKEN = RequestInfo(headers={"Authorization": f"Bearer {TOKEN}"}, client_host="10.0.0.9")
WITHOUT = RequestInfo(headers={}, client_host="10.0.0.9")


@pytest.mark.parametrize(
    ("spec", "request_info", "route_class", "spent"),
    [
        ("chat=1/5", WITH_TOKEN, RouteClass.CHAT, ("chat", bearer_key(TOKEN))),
        ("chat=1/5,anonymous=1/2", WITH_TOKEN, RouteClass.CHAT, ("chat", bearer_key(TOKEN))),
        ("chat=1/5,anonymous=1/2", WITHOUT, RouteClass.CHAT, ("anonymous", "ip:10.0.0.9")),
        ("anonymous=1/2,anonymous.feedback=1/9", WITHOUT, RouteClass.FEEDBACK,
         ("anonymous.feedback", "ip:10.0.0.9")),
        ("chat=1/5", WITHOUT, RouteClass.CHAT, ("chat", "ip:10.0.0.9")),
        ("*=1/5", WITHOUT, RouteClass.SEARCH, ("search", "ip:10.0.0.9")),
    ],
)
async def test_limit_class_and_sender(spec, request_info, route_class, spent) -> None:
    rate_limit, buckets = limiter(spec)
    decision = await rate_limit.admit(request_info, route_class)
    assert buckets.spent == [spent]
    assert decision.allowed and decision.headers["RateLimit-Limit"] == "5"


async def test_unlimited_classes_spend_nothing_and_send_no_headers() -> None:
    rate_limit, buckets = limiter("search=1/5")
    decision = await rate_limit.admit(WITH_TOKEN, RouteClass.READ)
    assert decision.allowed and decision.headers == {} and buckets.spent == []


async def test_forwarded_addresses_count_only_from_trusted_proxies() -> None:
    behind_proxy = RequestInfo(headers={"X-Forwarded-For": "198.51.100.7"}, client_host="10.0.0.1")
    trusting, trusted_buckets = limiter("*=1/5", trusted_proxies=["10.0.0.0/8"])
    naive, naive_buckets = limiter("*=1/5")
    await trusting.admit(behind_proxy, RouteClass.CHAT)
    await naive.admit(behind_proxy, RouteClass.CHAT)
    assert trusted_buckets.spent == [("chat", "ip:198.51.100.7")]
    assert naive_buckets.spent == [("chat", "ip:10.0.0.1")]


def test_a_refusal_carries_retry_after() -> None:
    error = RateDecision(allowed=False, headers={"Retry-After": "3"}, retry_after_s=3).refusal()
    assert error.code is ErrorCode.RATE_LIMITED and error.details == {"retry_after_s": 3}
