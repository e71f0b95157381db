"""HybridRetriever against a real in-memory Qdrant: filters, ACL, threshold, caps, routing, degradation."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.index_schema import alias_name, collection_name
from ragmesh_common.vectorstore.port import HybridQuery

from ragmesh_retrieval.domain.search import HINT_KEYWORD_ONLY, HINT_NO_SIGNAL, HINT_THRESHOLD

from retrieval_fixtures import Doc, Mesh, MeshFactory, unavailable

ALPHA = "alpha@1.0"
BETA = "beta@2.0"

ALPHA_DOCS = [
    Doc("Configure the retry budget with the retries setting in the client config", "docs/config/retries.md",
        tags=["config", "network"], parent_content="## Retries\nWhole section about retry budgets."),
    Doc("Install the package with pip and verify the installation", "docs/install.md", tags=["setup"]),
    Doc("The scheduler runs periodic jobs using cron expressions", "docs/scheduler/cron.md", tags=["config"]),
    Doc("Logging levels are set through the logging configuration file", "docs/config-logging.md",
        tags=["config"]),
]
BETA_DOCS = [
    Doc("Beta secret retry budget internals for the retries setting", "internal/retries.md", tags=["config"]),
]


async def indexed(mesh: Mesh) -> Mesh:
    await mesh.index(ALPHA, ALPHA_DOCS)
    await mesh.index(BETA, BETA_DOCS, visibility="internal")
    return mesh


def sample(name: str, labels: dict[str, str]) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def test_hybrid_search_ranks_the_matching_chunk_first(mesh: Mesh) -> None:
    await indexed(mesh)
    outcome = await mesh.search("how do I configure the retry budget", [ALPHA])
    assert outcome.query_mode == "hybrid"
    assert outcome.degraded == []
    assert outcome.index_versions == ["v1"]
    top = outcome.results[0]
    assert top.chunk.chunk_id == ALPHA_DOCS[0].chunk_id
    assert top.chunk.source_path == "docs/config/retries.md"
    assert top.chunk.index_version == "v1"
    assert set(top.scores) == {"fused", "dense", "sparse"}  # the reranker fuses dense and BM25 as priors
    assert top.scores["dense"] > 0.3 and top.scores["sparse"] > 0.0
    assert top.chunk.content == ""  # no parent expansion unless asked


async def test_parent_expansion_keeps_the_quote_as_the_chunk(mesh: Mesh) -> None:
    await indexed(mesh)
    outcome = await mesh.search("configure the retry budget", [ALPHA], include_content=True)
    top = outcome.results[0].chunk
    assert top.content == ALPHA_DOCS[0].parent_content
    assert top.quote == ALPHA_DOCS[0].text


async def test_tags_filter_requires_every_listed_tag(mesh: Mesh) -> None:
    await indexed(mesh)
    outcome = await mesh.search("configure settings config", [ALPHA], top_k=10, tags=("config", "network"))
    assert [r.chunk.chunk_id for r in outcome.results] == [ALPHA_DOCS[0].chunk_id]
    only_config = await mesh.search("configure settings config", [ALPHA], top_k=10, tags=("config",))
    assert {r.chunk.chunk_id for r in only_config.results} <= {ALPHA_DOCS[i].chunk_id for i in (0, 2, 3)}
    assert ALPHA_DOCS[1].chunk_id not in {r.chunk.chunk_id for r in only_config.results}


async def test_path_prefix_matches_whole_segments(mesh: Mesh) -> None:
    await indexed(mesh)
    outcome = await mesh.search("configure the retries setting in the logging config", [ALPHA], top_k=10,
                                path_prefix="./docs/config/")
    paths = {r.chunk.source_path for r in outcome.results}
    assert paths == {"docs/config/retries.md"}  # not docs/config-logging.md
    file_prefix = await mesh.search("cron jobs scheduler", [ALPHA], path_prefix="docs/scheduler/cron.md")
    assert [r.chunk.source_path for r in file_prefix.results] == ["docs/scheduler/cron.md"]


async def test_unreadable_corpus_is_never_returned_and_acl_is_inside_the_query(mesh: Mesh) -> None:
    await indexed(mesh)
    seen: list[HybridQuery] = []
    real_query = mesh.store.hybrid_query

    async def recording(query: HybridQuery):
        seen.append(query)
        return await real_query(query)

    mesh.store.hybrid_query = recording  # type: ignore[method-assign]
    outcome = await mesh.search("retry budget retries setting", [ALPHA], top_k=10)
    assert outcome.results
    assert {r.chunk.corpus for r in outcome.results} == {ALPHA}
    assert [q.collection for q in seen] == [collection_name(ALPHA, "v1")]
    assert all(q.filter.corpora == (ALPHA,) for q in seen)


async def test_store_filter_drops_a_mislabelled_point_of_an_unreadable_corpus(mesh: Mesh) -> None:
    # A point labelled "beta" inside alpha's own collection: routing alone would return it.
    stray = Doc("retry budget retries setting configure", "docs/stray.md", corpus_label=BETA)
    await mesh.index(ALPHA, [*ALPHA_DOCS, stray])
    await mesh.index(BETA, BETA_DOCS)
    outcome = await mesh.search("configure the retry budget retries setting", [ALPHA], top_k=10)
    assert stray.chunk_id not in {r.chunk.chunk_id for r in outcome.results}
    readable_both = await mesh.search("configure the retry budget retries setting", [ALPHA, BETA], top_k=10)
    assert stray.chunk_id in {r.chunk.chunk_id for r in readable_both.results}


async def test_unreadable_library_is_indistinguishable_from_a_missing_one(mesh: Mesh) -> None:
    await indexed(mesh)
    with pytest.raises(RagmeshError) as hidden:
        await mesh.search("retry budget", [ALPHA], library="beta")
    with pytest.raises(RagmeshError) as missing:
        await mesh.search("retry budget", [ALPHA], library="gamma")
    assert hidden.value.code == missing.value.code == ErrorCode.NOT_FOUND
    assert hidden.value.message == missing.value.message


async def test_library_matching_several_corpora_is_ambiguous_and_lists_readable_choices(mesh: Mesh) -> None:
    await mesh.index("alpha@1.0", ALPHA_DOCS[:2])
    await mesh.index("alpha@2.0", [Doc("Version two retry budget docs", "docs/v2.md")])
    await mesh.index("alpha@3.0", [Doc("Version three secret docs", "docs/v3.md")])
    readable = ["alpha@1.0", "alpha@2.0"]
    with pytest.raises(RagmeshError) as exc:
        await mesh.search("retry budget", readable, library="Alpha")
    assert exc.value.code == ErrorCode.AMBIGUOUS_LIBRARY
    assert exc.value.details["choices"] == [
        {"corpus": "alpha@1.0", "library": "alpha", "version": "1.0"},
        {"corpus": "alpha@2.0", "library": "alpha", "version": "2.0"},
    ]
    pinned = await mesh.search("retry budget", readable, library="alpha", version="2.0")
    assert pinned.index_versions == ["v1"]
    assert {r.chunk.version for r in pinned.results} == {"2.0"}
    with pytest.raises(RagmeshError) as unreadable:
        await mesh.search("retry budget", readable, library="alpha", version="3.0")
    assert unreadable.value.code == ErrorCode.NOT_FOUND


async def test_explicit_unknown_corpus_is_not_found(mesh: Mesh) -> None:
    await indexed(mesh)
    with pytest.raises(RagmeshError) as exc:
        await mesh.search("retry", [ALPHA], corpora=(ALPHA, BETA))
    assert exc.value.code == ErrorCode.NOT_FOUND
    assert exc.value.details == {"corpora": [BETA]}


async def test_no_readable_active_corpus_is_no_active_index(mesh: Mesh) -> None:
    await mesh.index(ALPHA, ALPHA_DOCS, activate=False)
    with pytest.raises(RagmeshError) as exc:
        await mesh.search("retry", [ALPHA])
    assert exc.value.code == ErrorCode.NO_ACTIVE_INDEX


async def test_nothing_above_the_threshold_gives_an_empty_result_and_a_hint(mesh: Mesh) -> None:
    await indexed(mesh)
    outcome = await mesh.search("zebra quantum pancake", [ALPHA], top_k=5)
    assert outcome.results == []
    assert outcome.filtered_by_threshold == len(ALPHA_DOCS)
    assert outcome.hint == HINT_THRESHOLD


async def test_threshold_drops_weak_hits_but_keeps_strong_ones(make_mesh: MeshFactory) -> None:
    mesh = await make_mesh(min_dense_score=0.5)
    await indexed(mesh)
    outcome = await mesh.search("configure the retry budget with the retries setting", [ALPHA], top_k=10)
    assert [r.chunk.chunk_id for r in outcome.results] == [ALPHA_DOCS[0].chunk_id]
    assert all(r.scores["dense"] >= 0.5 for r in outcome.results)
    assert outcome.filtered_by_threshold == len(ALPHA_DOCS) - 1
    assert outcome.hint == ""


async def test_a_strong_keyword_match_passes_the_threshold_its_dense_score_misses(make_mesh: MeshFactory) -> None:
    # A chunk that mixes topics ("Peyton Manning ... Lady Gaga performed the national anthem") has
    # a low cosine to a question about its minor topic, yet BM25 finds the question's rare words
    # in it: the threshold lets a hit through on either signal.
    mesh = await make_mesh(min_dense_score=0.99, min_sparse_score=1.0)
    await indexed(mesh)
    outcome = await mesh.search("cron expressions", [ALPHA], top_k=10)
    assert [r.chunk.chunk_id for r in outcome.results] == [ALPHA_DOCS[2].chunk_id]
    assert outcome.results[0].scores["dense"] < 0.99 <= 1.0 <= outcome.results[0].scores["sparse"]
    assert outcome.filtered_by_threshold == len(ALPHA_DOCS) - 1


async def test_a_weak_keyword_match_does_not_pass_the_threshold(make_mesh: MeshFactory) -> None:
    mesh = await make_mesh(min_dense_score=0.99, min_sparse_score=50.0)
    await indexed(mesh)
    outcome = await mesh.search("cron expressions", [ALPHA], top_k=10)
    assert outcome.results == []
    assert outcome.hint == HINT_THRESHOLD


async def test_top_k_above_the_cap_is_truncated(make_mesh: MeshFactory) -> None:
    mesh = await make_mesh(max_top_k=2, min_dense_score=-1.0)
    await indexed(mesh)
    outcome = await mesh.search("configure retry install scheduler logging", [ALPHA], top_k=10)
    assert outcome.top_k_truncated is True
    assert len(outcome.results) == 2
    within = await mesh.search("configure retry install scheduler logging", [ALPHA], top_k=2)
    assert within.top_k_truncated is False


@pytest.mark.parametrize("top_k", [0, -3])
async def test_top_k_below_one_is_rejected(mesh: Mesh, top_k: int) -> None:
    await indexed(mesh)
    with pytest.raises(RagmeshError) as exc:
        await mesh.search("retry", [ALPHA], top_k=top_k)
    assert exc.value.code == ErrorCode.TOP_K_OUT_OF_RANGE
    assert exc.value.grpc_status_name == "INVALID_ARGUMENT"


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ("", ErrorCode.QUERY_EMPTY),
        (" \n\t ", ErrorCode.QUERY_EMPTY),
        ("x" * 2001, ErrorCode.QUERY_TOO_LONG),
        ("retry\x00budget", ErrorCode.INVALID_ARGUMENT),
        ("retry \x1b[31m budget", ErrorCode.INVALID_ARGUMENT),
    ],
)
async def test_bad_queries_are_rejected_with_stable_codes(mesh: Mesh, query: str, code: ErrorCode) -> None:
    await indexed(mesh)
    with pytest.raises(RagmeshError) as exc:
        await mesh.search(query, [ALPHA])
    assert exc.value.code == code
    assert "budget" not in exc.value.message  # never echo the query
    assert mesh.embedder.calls == 0


async def test_query_at_the_length_limit_is_accepted(mesh: Mesh) -> None:
    await indexed(mesh)
    outcome = await mesh.search(("retry " * 400)[:2000], [ALPHA])
    assert outcome.results


async def test_control_characters_in_filters_are_rejected(mesh: Mesh) -> None:
    await indexed(mesh)
    with pytest.raises(RagmeshError) as exc:
        await mesh.search("retry", [ALPHA], tags=("ok", "bad\x07"))
    assert exc.value.code == ErrorCode.INVALID_ARGUMENT


async def test_embedding_runtime_down_degrades_to_keyword_search(mesh: Mesh) -> None:
    await indexed(mesh)
    mesh.embedder.failure = unavailable()
    before = sample("ragmesh_degraded_total", {"service": "retrieval", "component": "embedding"})
    outcome = await mesh.search("configure the retry budget", [ALPHA])
    assert outcome.query_mode == "sparse"
    assert outcome.degraded == ["embedding"]
    assert outcome.results[0].chunk.chunk_id == ALPHA_DOCS[0].chunk_id
    assert set(outcome.results[0].scores) == {"fused", "sparse"}
    assert outcome.filtered_by_threshold == 0  # no dense signal, no threshold
    assert HINT_KEYWORD_ONLY in outcome.hint
    after = sample("ragmesh_degraded_total", {"service": "retrieval", "component": "embedding"})
    assert after == before + 1


async def test_embedding_timeout_degrades_to_keyword_search(make_mesh: MeshFactory) -> None:
    mesh = await make_mesh(embed_timeout_s=0.05)
    await indexed(mesh)
    mesh.embedder.delay_s = 30.0
    outcome = await mesh.search("configure the retry budget", [ALPHA])
    assert outcome.query_mode == "sparse"
    assert outcome.degraded == ["embedding"]
    assert outcome.results


async def test_index_built_with_another_model_is_searched_by_keywords_and_reported(mesh: Mesh) -> None:
    await indexed(mesh)
    mesh.embedder.model = "another/model"
    outcome = await mesh.search("configure the retry budget", [ALPHA])
    assert outcome.query_mode == "sparse"
    assert outcome.degraded == ["embedding_model"]
    assert outcome.results[0].chunk.chunk_id == ALPHA_DOCS[0].chunk_id


async def test_repeated_query_costs_no_model_call(mesh: Mesh) -> None:
    await indexed(mesh)
    await mesh.search("configure the retry budget", [ALPHA])
    await mesh.search("  configure the retry budget  ", [ALPHA])
    assert mesh.embedder.calls == 1
    await mesh.search("install the package", [ALPHA])
    assert mesh.embedder.calls == 2


async def test_fan_out_is_capped_and_skipped_corpora_are_listed(make_mesh: MeshFactory) -> None:
    mesh = await make_mesh(max_libraries=2)
    corpora = ["a@1", "b@1", "c@1"]
    for corpus in corpora:
        await mesh.index(corpus, [Doc(f"retry budget notes for {corpus[0]}", "docs/r.md")])
    outcome = await mesh.search("retry budget", corpora, top_k=10)
    assert outcome.skipped_libraries == ["c@1"]
    assert outcome.index_versions == ["v1"]  # one version name, two corpora
    assert {r.chunk.corpus for r in outcome.results} == {"a@1", "b@1"}
    assert "searched 2 of 3 corpora" in outcome.hint


async def test_results_merge_across_corpora_by_fused_score(mesh: Mesh) -> None:
    await indexed(mesh)
    outcome = await mesh.search("retry budget retries setting", [ALPHA, BETA], top_k=10)
    assert {r.chunk.corpus for r in outcome.results} == {ALPHA, BETA}
    fused = [r.scores["fused"] for r in outcome.results]
    assert fused == sorted(fused, reverse=True)
    assert {r.chunk.index_version for r in outcome.results} == {"v1"} and outcome.index_versions == ["v1"]


async def test_alias_swap_and_dropped_collection_are_picked_up(mesh: Mesh) -> None:
    old = await mesh.index(ALPHA, ALPHA_DOCS, index_version="v1")
    await mesh.search("retry budget", [ALPHA])  # the catalog now caches v1 (TTL 60 s)
    new_doc = Doc("retry budget rewritten for version two", "docs/config/retries.md")
    new = await mesh.index(ALPHA, [new_doc], index_version="v2", activate=False)
    await mesh.store.set_alias(alias_name(ALPHA), new)  # behind the catalog's back
    await mesh.store.delete_collection(old)
    outcome = await mesh.search("retry budget", [ALPHA])
    assert outcome.index_versions == ["v2"] and new == collection_name(ALPHA, "v2")
    assert [r.chunk.chunk_id for r in outcome.results] == [new_doc.chunk_id]


async def test_store_down_is_unavailable(mesh: Mesh) -> None:
    await indexed(mesh)
    await mesh.search("retry budget", [ALPHA])  # catalog cached: the failure comes from the query itself
    mesh.store.client.close()  # the storage goes away under the adapter
    with pytest.raises(RagmeshError) as exc:
        await mesh.search("retry budget", [ALPHA])
    assert exc.value.code == ErrorCode.UNAVAILABLE
    mesh.catalog.invalidate()
    with pytest.raises(RagmeshError) as listing:
        await mesh.search("retry budget", [ALPHA])
    assert listing.value.code == ErrorCode.UNAVAILABLE


async def test_index_built_with_another_tokenizer_still_searches_and_reports_it(mesh: Mesh) -> None:
    await mesh.index(ALPHA, ALPHA_DOCS, lexical_version="bm25-r0-000000000000")
    outcome = await mesh.search("configure the retry budget", [ALPHA])
    assert outcome.query_mode == "hybrid"
    assert outcome.degraded == ["lexical"]
    assert outcome.results[0].chunk.chunk_id == ALPHA_DOCS[0].chunk_id


async def test_unloadable_tokenizer_config_searches_dense_only(mesh: Mesh) -> None:
    await mesh.index(ALPHA, ALPHA_DOCS, lexical_config={"language": "klingon"})
    outcome = await mesh.search("configure the retry budget", [ALPHA])
    assert outcome.query_mode == "dense"
    assert outcome.degraded == ["lexical"]
    assert outcome.results[0].chunk.chunk_id == ALPHA_DOCS[0].chunk_id


async def test_stopword_query_without_embeddings_has_no_signal_and_says_so(mesh: Mesh) -> None:
    await indexed(mesh)
    mesh.embedder.failure = unavailable()
    outcome = await mesh.search("the of and", [ALPHA])
    assert outcome.results == []
    assert outcome.degraded == ["embedding"]
    assert outcome.hint == HINT_NO_SIGNAL
