"""Stable ids and citation URLs."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.index_schema import is_chunk_id
from ragmesh_indexer.domain import (
    ChunkingConfig,
    PathStyle,
    SlugRegistry,
    UrlScheme,
    chunk_document,
    doc_id,
    github_slug,
    is_uuid_id,
    parse_text,
    require_chunk_id,
    scan_corpus,
)

DOC = """# Guide

Intro paragraph that never changes.

## Install

Run the installer.

## Use

Call the API.
"""


def _chunks(text: str, strategy: str = "heading", corpus: str = "c", path: str = "g.md"):
    doc = parse_text(path, "markdown", text)
    return chunk_document(doc, corpus=corpus, config=ChunkingConfig(strategy=strategy)).chunks


def test_ids_are_stable_across_runs(mixed_corpus: Path) -> None:
    def all_ids() -> list[tuple[str, str, str]]:
        out = []
        for doc in scan_corpus(mixed_corpus).documents:
            for strategy in ("heading", "split", "fixed"):
                article = chunk_document(doc, corpus="mixed", config=ChunkingConfig(strategy=strategy))
                out += [(c.doc_id, c.parent_id, c.chunk_id) for c in article.chunks]
        return out

    first = all_ids()
    assert first == all_ids()
    chunk_ids = [c for _, _, c in first]
    assert len(set(chunk_ids)) == len(chunk_ids)  # unique across documents and strategies
    assert all(is_uuid_id(i) and is_chunk_id(i) for triple in first for i in triple)
    assert all(uuid.UUID(c).version == 5 for c in chunk_ids)


def test_unchanged_content_keeps_its_id_when_other_content_changes() -> None:
    before = {c.heading_path[-1]: c for c in _chunks(DOC)}
    edited = DOC.replace("Run the installer.", "Run the new installer twice.")
    after = {c.heading_path[-1]: c for c in _chunks("\n" + edited)}
    assert after["Guide"].chunk_id == before["Guide"].chunk_id
    assert after["Use"].chunk_id == before["Use"].chunk_id
    assert after["Use"].line_start == before["Use"].line_start + 1  # lines moved, id did not
    assert after["Install"].chunk_id != before["Install"].chunk_id
    assert after["Install"].parent_id != before["Install"].parent_id
    assert after["Use"].parent_id == before["Use"].parent_id


def test_ids_depend_on_corpus_path_and_strategy() -> None:
    base = _chunks(DOC)[0]
    assert _chunks(DOC, corpus="other")[0].chunk_id != base.chunk_id
    assert _chunks(DOC, path="h.md")[0].chunk_id != base.chunk_id
    assert _chunks(DOC, strategy="split")[0].chunk_id != base.chunk_id
    assert doc_id("c", "g.md") == base.doc_id
    assert doc_id("c", "g.md") != doc_id("c", "G.md")


def test_identical_chunks_in_one_document_get_distinct_ids() -> None:
    text = "# A\n\nSame words.\n\n# A\n\nSame words.\n"
    chunks = _chunks(text)
    assert chunks[0].text == chunks[1].text
    assert chunks[0].chunk_id != chunks[1].chunk_id
    assert chunks[0].parent_id != chunks[1].parent_id


def test_malformed_chunk_ids_are_detected() -> None:
    good = _chunks(DOC)[0].chunk_id
    assert require_chunk_id(good) == good
    for bad in ("", "abc", good.upper(), good.replace("-", ""), good[:-1], "{" + good + "}", 42, None):
        assert not is_uuid_id(bad)
        with pytest.raises(RagmeshError) as info:
            require_chunk_id(bad)
        assert info.value.code is ErrorCode.MALFORMED_CHUNK_ID


@pytest.mark.parametrize(
    ("heading", "slug"),
    [
        ("Getting Started", "getting-started"),
        ("Install & Configure!", "install--configure"),
        ("What's new in v2.0?", "whats-new-in-v20"),
        ("  Trim me  ", "trim-me"),
        ("snake_case and kebab-case", "snake_case-and-kebab-case"),
        ("API `get()` call", "api-get-call"),
        ("安装指南", "安装指南"),
        ("配置 服务（高级）", "配置-服务高级"),
        ("Mixed 中英 Heading", "mixed-中英-heading"),
        ("Ünïcödé Café", "ünïcödé-café"),
        ("Emoji 🚀 launch", "emoji--launch"),
    ],
)
def test_github_slugs(heading: str, slug: str) -> None:
    assert github_slug(heading) == slug


def test_duplicate_slugs_are_numbered_like_github() -> None:
    registry = SlugRegistry()
    claimed = [registry.claim(h) for h in ("FAQ", "FAQ", "FAQ-1", "FAQ", "安装", "安装")]
    assert claimed == ["faq", "faq-1", "faq-1-1", "faq-2", "安装", "安装-1"]


def test_url_styles() -> None:
    assert UrlScheme().anchor_url("guide/intro.md", "install") == "guide/intro#install"
    base = "https://docs.example.com/v1/"
    assert UrlScheme(base).document_url("guide/intro.md") == "https://docs.example.com/v1/guide/intro"
    assert UrlScheme(base, PathStyle.HTML).document_url("guide/intro.md").endswith("/guide/intro.html")
    assert UrlScheme(base, PathStyle.DIRECTORY).document_url("guide/intro.md").endswith("/guide/intro/")
    assert UrlScheme(base, PathStyle.DIRECTORY).document_url("guide/index.md").endswith("/guide/")
    assert UrlScheme(base, PathStyle.KEEP).document_url("guide/intro.md").endswith("/guide/intro.md")
    assert UrlScheme(base).anchor_url("manual.pdf", "page=2").endswith("/manual.pdf#page=2")
    assert UrlScheme().document_url("my docs/a b.md") == "my%20docs/a%20b"
    assert UrlScheme().anchor_url("zh/指南.md", "配置-服务") == "zh/%E6%8C%87%E5%8D%97#%E9%85%8D%E7%BD%AE-%E6%9C%8D%E5%8A%A1"


def test_chunk_urls_carry_section_anchors(mixed_corpus: Path) -> None:
    (doc,) = [d for d in scan_corpus(mixed_corpus).documents if d.path == "guide/intro.md"]
    article = chunk_document(doc, corpus="c", config=ChunkingConfig(), urls=UrlScheme("https://d.example/"))
    assert article.url == "https://d.example/guide/intro"
    urls = {c.heading_path[-1]: c.url for c in article.chunks}
    assert urls["Install & Configure!"] == "https://d.example/guide/intro#install--configure"
    assert {p.url for p in article.parents} >= {"https://d.example/guide/intro#faq", "https://d.example/guide/intro#faq-1"}
    assert {c.parent_id for c in article.chunks} == {p.parent_id for p in article.parents}
