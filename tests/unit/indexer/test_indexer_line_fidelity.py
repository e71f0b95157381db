"""Every chunk's quote is found at its recorded lines (or page) of the original file.

Runs over the whole mixed corpus (CRLF, CJK, HTML, PDF included) with every strategy, at default
sizes and at sizes small enough to force splits inside blocks and inside long lines.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ragmesh_indexer.domain import (
    ChunkingConfig,
    QuoteLocator,
    QuoteMatch,
    chunk_document,
    quote_found_at,
    scan_corpus,
)

CONFIGS = [
    ChunkingConfig(strategy="heading"),
    ChunkingConfig(strategy="split"),
    ChunkingConfig(strategy="fixed"),
    ChunkingConfig(strategy="heading", max_chars=60, min_chars=0, max_atomic_chars=200),
    ChunkingConfig(strategy="split", max_chars=50, min_chars=20, max_atomic_chars=60),
    ChunkingConfig(strategy="fixed", max_chars=70, min_chars=0, window_lines=3, overlap_lines=1),
]


def _lines(data: bytes) -> list[str]:
    return data.decode("utf-8-sig").replace("\r\n", "\n").replace("\r", "\n").split("\n")


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"{c.strategy}-{c.max_chars}")
def test_every_quote_is_at_its_recorded_place(corpus_copy: Path, config: ChunkingConfig) -> None:
    result = scan_corpus(corpus_copy)
    checked: dict[str, int] = {}
    for doc in result.documents:
        data = (corpus_copy / doc.path).read_bytes()
        locator = QuoteLocator(data)
        chunks = chunk_document(doc, corpus="mixed", config=config).chunks
        assert chunks, doc.path
        for chunk in chunks:
            where = f"{doc.path}:{chunk.line_start}-{chunk.line_end} p{chunk.page}"
            assert quote_found_at(data, chunk.text, chunk.line_start, chunk.line_end, chunk.page), where
            match = locator.locate(chunk.text, chunk.line_start, chunk.line_end, chunk.page)
            if doc.parser == "pdf":
                assert chunk.page >= 1 and chunk.line_start == chunk.line_end == 0, where
                assert match is QuoteMatch.EXACT, where
            elif doc.parser == "html":
                assert chunk.page == 0 and 1 <= chunk.line_start <= chunk.line_end, where
            else:
                assert match is QuoteMatch.EXACT, where
                _assert_tight(_lines(data), chunk.text, chunk.line_start, chunk.line_end, where)
            checked[doc.parser] = checked.get(doc.parser, 0) + 1
    assert set(checked) == {"markdown", "text", "html", "pdf"}


def _assert_tight(lines: list[str], quote: str, start: int, end: int, where: str) -> None:
    """The recorded range is exactly the quote's lines: it opens on line_start, closes on line_end."""
    quote_lines = quote.split("\n")
    assert len(quote_lines) == end - start + 1, where
    assert quote_lines[0].strip() in lines[start - 1], where
    assert quote_lines[-1].strip() in lines[end - 1], where


def test_wrong_lines_or_page_are_rejected(corpus_copy: Path) -> None:
    result = scan_corpus(corpus_copy)
    rejected = 0
    for doc in result.documents:
        data = (corpus_copy / doc.path).read_bytes()
        text = doc.text
        for chunk in chunk_document(doc, corpus="mixed", config=ChunkingConfig(strategy="split", max_chars=80, min_chars=0)).chunks:
            if text.count(chunk.text) > 1:
                continue
            if chunk.page:
                other = 2 if chunk.page == 1 else 1
                assert not quote_found_at(data, chunk.text, 0, 0, other)
            else:
                span = chunk.line_end - chunk.line_start
                # disjoint windows right after and right before the recorded range
                assert not quote_found_at(data, chunk.text, chunk.line_end + 1, chunk.line_end + 1 + span)
                if chunk.line_start - 1 - span >= 1:
                    assert not quote_found_at(data, chunk.text, chunk.line_start - 1 - span, chunk.line_start - 1)
                if doc.verbatim:  # Markdown and text ranges are tight: off by one line is wrong
                    assert not quote_found_at(data, chunk.text, chunk.line_start + 1, chunk.line_end + 1)
                    if chunk.line_start > 1:
                        assert not quote_found_at(data, chunk.text, chunk.line_start - 1, chunk.line_end - 1)
            rejected += 1
    assert rejected > 20


def test_quote_found_at_edge_cases() -> None:
    crlf = "first line\r\nsecond  line\r\n\r\n第三行，中文。\r\n".encode()
    assert quote_found_at(crlf, "second  line", 2, 2)
    assert quote_found_at(crlf, "first line\nsecond  line", 1, 2)
    assert quote_found_at(crlf, "第三行", 4, 4)
    assert not quote_found_at(crlf, "第三行", 1, 3)
    assert not quote_found_at(crlf, "second", 0, 2)  # lines are 1-based
    assert not quote_found_at(crlf, "second", 2, 9)  # past the end
    assert not quote_found_at(crlf, "", 1, 4)
    assert not quote_found_at(b"\xff\xfe bad", "bad", 1, 1)
    assert not quote_found_at("plain text", "plain", 0, 0, page=1)  # no PDF to read
    html = '<p>Hello <b>brave</b>\n new &amp; world</p>'
    assert QuoteLocator(html).locate("Hello brave new & world", 1, 2) is QuoteMatch.MARKUP
    assert not quote_found_at(html, "Hello brave new & world", 1, 1)


def test_cjk_long_line_is_split_inside_the_line(mixed_corpus: Path) -> None:
    (doc,) = [d for d in scan_corpus(mixed_corpus).documents if d.path == "zh/安装指南.md"]
    data = (mixed_corpus / doc.path).read_bytes()
    lines = _lines(data)
    chunks = chunk_document(doc, corpus="c", config=ChunkingConfig(strategy="split", max_chars=50, min_chars=0)).chunks
    inside = [c for c in chunks if c.line_start == c.line_end and c.text != lines[c.line_start - 1].strip()]
    assert len(inside) >= 2
    for chunk in inside:
        assert len(chunk.text) <= 50
        assert chunk.text in lines[chunk.line_start - 1]
        assert quote_found_at(data, chunk.text, chunk.line_start, chunk.line_end)
