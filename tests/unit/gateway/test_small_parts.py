"""Request ids, settings parsing, readiness and index-admin access rules."""

from __future__ import annotations

import pytest

from ragmesh_common.errors import ErrorCode, RagmeshError

from gateway_fakes import LOCAL, FakeCatalog, FakeIndexAdmin, FakeProbe
from ragmesh_gateway.access.ports import Caller
from ragmesh_gateway.catalog import ConfiguredCorpusDirectory, CorpusInfo
from ragmesh_gateway.health.service import ReadinessService
from ragmesh_gateway.index_admin.ports import CorpusSpec
from ragmesh_gateway.index_admin.service import IndexAdminService
from ragmesh_gateway.settings import parse_corpus_roots
from ragmesh_gateway.web.request_context import accept_request_id

DIRECTORY = ConfiguredCorpusDirectory({"docs@1", "secret@1"})


@pytest.mark.parametrize("value", ["abc-123", "0f6e2c1a9b8d4e7f", "req.1:2_3", "A" * 128])
def test_well_formed_request_ids_are_kept(value: str) -> None:
    assert accept_request_id(value) == value


@pytest.mark.parametrize("value", [None, "", "-leading", "a b", "x" * 129, "évil", "a\nb", "a;b", "<script>"])
def test_other_request_ids_are_replaced(value: str | None) -> None:
    fresh = accept_request_id(value)
    assert fresh != value and len(fresh) == 32 and fresh.isalnum()


def test_corpus_roots_setting() -> None:
    assert parse_corpus_roots(["docs=/srv/docs", " api@2 = /srv/api "]) == {
        "docs": "/srv/docs",
        "api@2": "/srv/api",
    }
    with pytest.raises(SystemExit):
        parse_corpus_roots(["no-equals-sign"])


async def test_ready_when_everything_serves_and_a_corpus_is_active() -> None:
    readiness = await ReadinessService(
        [FakeProbe("retrieval"), FakeProbe("rerank")], FakeCatalog(), DIRECTORY
    ).check()
    assert readiness.ready and readiness.active_corpora == 2
    assert readiness.checks == {"retrieval": "serving", "rerank": "serving", "corpora": "serving"}


async def test_readiness_asks_about_the_served_corpora_by_name() -> None:
    catalog = FakeCatalog()
    await ReadinessService([], catalog, ConfiguredCorpusDirectory({"docs@1"})).check()
    assert catalog.requests == [("docs@1",)]


async def test_not_ready_names_what_is_missing() -> None:
    catalog = FakeCatalog([CorpusInfo("docs@1", "docs", "1", state="empty")])
    readiness = await ReadinessService(
        [FakeProbe("retrieval"), FakeProbe("rerank", serving=False)], catalog, DIRECTORY
    ).check()
    assert not readiness.ready
    assert readiness.checks == {"retrieval": "serving", "rerank": "not_serving", "corpora": "not_serving"}
    assert "rerank" in readiness.reason and "corpora" in readiness.reason


async def test_catalog_failure_means_not_ready() -> None:
    catalog = FakeCatalog()
    catalog.error = RagmeshError(ErrorCode.UNAVAILABLE, "retrieval is unavailable")
    readiness = await ReadinessService([FakeProbe("retrieval")], catalog, DIRECTORY).check()
    assert not readiness.ready and readiness.checks["corpora"] == "not_serving"


async def test_index_admin_needs_index_scopes_and_records_the_actor() -> None:
    admin = FakeIndexAdmin()
    service = IndexAdminService(admin)
    reader = Caller("reader", scopes=frozenset({"rag:search", "rag:read"}))
    builder = Caller("ci", scopes=frozenset({"rag:index:build"}))
    for call in (
        service.promote("docs@1", "v2", reason="r", caller=reader),
        service.rollback("docs@1", reason="r", caller=builder),
        service.status("docs@1", reader),
    ):
        with pytest.raises(RagmeshError) as err:
            await call
        assert err.value.code is ErrorCode.PERMISSION_DENIED
    assert admin.calls == []
    await service.build(CorpusSpec(corpus="docs@1", root="/srv"), force=False, reason="", caller=builder)
    await service.status("docs@1", builder)
    assert [c[0] for c in admin.calls] == ["build", "status"]
    # A build scope alone is not admin: the indexer keeps root, visibility and new corpora in check.
    assert admin.calls[0][-1] is False
    admin.calls.clear()
    await service.build(CorpusSpec(corpus="docs@1", root="/srv"), force=True, reason="nightly", caller=LOCAL)
    assert admin.calls == [("build", "docs@1", True, "local", "nightly", True)]


def test_embedded_default_has_auth_and_rate_limits_off() -> None:
    from ragmesh_gateway.access.ports import NoRateLimit
    from ragmesh_gateway.composition import build_deps
    from ragmesh_gateway.settings import GatewaySettings

    deps = build_deps(GatewaySettings(corpora=["a@1"], corpus_roots={"b@2": "/srv/b"}))
    assert deps.authenticator is None and isinstance(deps.rate_limiter, NoRateLimit)


async def test_auth_disabled_reads_every_served_corpus_and_nothing_else() -> None:
    from ragmesh_gateway.access.ports import AuthDisabled, RequestInfo

    directory = ConfiguredCorpusDirectory({"a@1", "b@2"})
    for host in ("127.0.0.1", "::1", "10.1.2.3", None):
        caller = await AuthDisabled(directory).authenticate(RequestInfo(headers={}, client_host=host))
        assert caller.readable_list() == ["a@1", "b@2"]
        assert not caller.can_read("c@3")


async def test_auth_disabled_gives_the_index_routes_to_loopback_callers_only() -> None:
    from ragmesh_gateway.access.ports import AuthDisabled, RequestInfo
    from ragmesh_gateway.access.tokens import Scope

    directory = ConfiguredCorpusDirectory({"a@1"})
    local = await AuthDisabled(directory).authenticate(RequestInfo(headers={}, client_host="127.0.0.1"))
    assert local.is_admin
    remote = await AuthDisabled(directory).authenticate(RequestInfo(headers={}, client_host="192.168.1.9"))
    assert not remote.is_admin and remote.allows(Scope.SEARCH) and remote.allows(Scope.ANSWER)
    with pytest.raises(RagmeshError) as refused:
        remote.require(Scope.INDEX_BUILD)
    assert refused.value.code is ErrorCode.PERMISSION_DENIED and "loopback" in refused.value.message


async def test_auth_disabled_says_when_a_token_it_was_shown_went_unchecked() -> None:
    from ragmesh_gateway.access.ports import AuthDisabled, RequestInfo

    directory = ConfiguredCorpusDirectory({"a@1"})
    for host in ("127.0.0.1", "192.168.1.9"):
        for headers in ({"authorization": "Bearer bogus"}, {"Authorization": "rmk_x.y"}):
            caller = await AuthDisabled(directory).authenticate(RequestInfo(headers=headers, client_host=host))
            assert caller.token_unchecked, (host, headers)
        plain = await AuthDisabled(directory).authenticate(RequestInfo(headers={"accept": "*/*"}, client_host=host))
        assert not plain.token_unchecked


def test_token_mode_and_rate_limits_are_wired_from_settings() -> None:
    from ragmesh_gateway.access.adapters import RedisRateLimit, TokenAuthenticator
    from ragmesh_gateway.composition import build_deps
    from ragmesh_gateway.settings import GatewaySettings

    deps = build_deps(
        GatewaySettings(
            auth_mode="tokens",
            postgres_url="postgresql://db/x",
            rate_limits="search=1/2",
            redis_url="redis://127.0.0.1:1/0",
        )
    )
    assert isinstance(deps.authenticator, TokenAuthenticator) and isinstance(
        deps.rate_limiter, RedisRateLimit
    )
    assert len(deps.on_start) == 1  # the token store opens its pool in the lifespan, not at import


@pytest.mark.parametrize(
    "overrides",
    [
        {"auth_mode": "tokens"},
        {"rate_limits": "search=1/2"},
        {"rate_limits": "nonsense", "redis_url": "redis://x"},
    ],
)
def test_incomplete_access_settings_stop_the_start(overrides: dict) -> None:
    from ragmesh_gateway.composition import build_deps
    from ragmesh_gateway.settings import GatewaySettings

    with pytest.raises(SystemExit):
        build_deps(GatewaySettings(**overrides))
