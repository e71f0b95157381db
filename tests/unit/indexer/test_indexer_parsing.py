"""Parsers: structure, headings, frontmatter, atomic blocks, per-format specifics."""

from __future__ import annotations

from pathlib import Path

from pdf_builder import minimal_pdf

from ragmesh_indexer.domain import ChunkingConfig, chunk_document, parse_document, parse_text


def _parse(corpus: Path, rel: str, parser: str):
    return parse_document(rel, parser, (corpus / rel).read_bytes())


def _block_text(doc, kind: str) -> list[str]:
    return [doc.text[b.start : b.end] for s in doc.sections for b in s.blocks if b.kind == kind]


def test_frontmatter_title_tags_and_metadata(mixed_corpus: Path) -> None:
    doc = _parse(mixed_corpus, "guide/intro.md", "markdown")
    assert doc.title == "Getting Started with Ragmesh"
    assert doc.tags == ["guide", "setup"]
    assert doc.metadata["owner"] == "docs-team"
    assert doc.index is True and doc.warnings == []
    zh = _parse(mixed_corpus, "zh/安装指南.md", "markdown")
    assert zh.title == "安装指南" and zh.tags == ["中文", "安装"]


def test_index_false_and_broken_frontmatter(mixed_corpus: Path) -> None:
    assert _parse(mixed_corpus, "private.md", "markdown").index is False
    # broken YAML that still says index: false is honoured
    assert _parse(mixed_corpus, "broken-private.md", "markdown").index is False
    broken = _parse(mixed_corpus, "broken-frontmatter.md", "markdown")
    assert broken.index is True and broken.warnings[0].startswith("broken-frontmatter")
    unclosed = parse_text("u.md", "markdown", "---\ntitle: Never closed\n\n# Body\n\nText.\n")
    assert unclosed.warnings and "not closed" in unclosed.warnings[0]


def test_frontmatter_variants() -> None:
    doc = parse_text("t.md", "markdown", "---\ntags: a, b ,c\nindex: 'no'\ndate: 2024-01-02\n---\n# T\n\nx\n")
    assert doc.tags == ["a", "b", "c"]
    assert doc.index is False
    assert doc.metadata["date"] == "2024-01-02"
    not_mapping = parse_text("l.md", "markdown", "---\n- just\n- a list\n---\n# L\n\nx\n")
    assert not_mapping.warnings and not_mapping.index is True


def test_heading_paths_and_anchors(mixed_corpus: Path) -> None:
    doc = _parse(mixed_corpus, "guide/intro.md", "markdown")
    got = [(s.heading_path, s.anchor, s.level) for s in doc.sections]
    assert got == [
        (["Getting Started"], "getting-started", 1),
        (["Getting Started", "Install & Configure!"], "install--configure", 2),
        (["Getting Started", "FAQ"], "faq", 2),
        (["Getting Started", "FAQ"], "faq-1", 2),
        (["Getting Started", "FAQ", 'Why "exact lines"?'], "why-exact-lines", 3),
    ]
    zh = _parse(mixed_corpus, "zh/安装指南.md", "markdown")
    assert [s.anchor for s in zh.sections] == ["安装指南", "配置-服务", "配置-服务-1", "mixed-中英-heading"]


def test_code_fence_and_table_are_single_blocks(mixed_corpus: Path) -> None:
    doc = _parse(mixed_corpus, "guide/intro.md", "markdown")
    (code,) = _block_text(doc, "code")
    assert code.startswith("```bash") and code.endswith("```")
    assert "# a comment that must stay inside the fence" in code
    (table,) = _block_text(doc, "table")
    assert table.count("\n") == 4 and "indexer   | 50054" in table


def test_code_and_table_stay_whole_in_chunks(mixed_corpus: Path) -> None:
    doc = _parse(mixed_corpus, "guide/intro.md", "markdown")
    (code,) = _block_text(doc, "code")
    (table,) = _block_text(doc, "table")
    # max_chars below each block's size: atomic blocks still must not be cut
    for strategy in ("heading", "split"):
        config = ChunkingConfig(strategy=strategy, max_chars=60, min_chars=0, max_atomic_chars=1000)
        chunks = chunk_document(doc, corpus="c", config=config).chunks
        assert any(code in c.text for c in chunks), strategy
        assert any(table in c.text for c in chunks), strategy
        assert not any(c.text in code and c.text != code and "make setup" in c.text for c in chunks)


def test_oversized_atomic_block_is_split_by_lines() -> None:
    body = "\n".join(f"line_{i} = {i}" for i in range(200))
    doc = parse_text("big.md", "markdown", f"# Big\n\n```python\n{body}\n```\n")
    chunks = chunk_document(doc, corpus="c", config=ChunkingConfig(max_chars=500, max_atomic_chars=1000)).chunks
    assert len(chunks) > 5
    # a heading stays with the text under it, so only the first chunk may exceed by the heading
    assert len(chunks[0].text) <= 500 + len("# Big\n\n")
    assert all(len(c.text) <= 500 for c in chunks[1:])
    assert "line_199 = 199" in chunks[-1].text


def test_html_structure(mixed_corpus: Path) -> None:
    doc = _parse(mixed_corpus, "page.html", "html")
    assert doc.title == "Retrieval Pipeline"
    assert [(s.heading_path, s.anchor) for s in doc.sections] == [
        (["Retrieval Pipeline"], "pipeline"),  # the element's own id wins
        (["Retrieval Pipeline", "Stages"], "stages"),
        (["Retrieval Pipeline", "Stages"], "stages-1"),
    ]
    assert "Home" not in doc.text and "Copyright" not in doc.text and "console.log" not in doc.text
    assert "fuses the rankings & reranks them" in doc.text
    assert "an HTML comment" not in doc.text
    assert "Loose text inside a div still counts, with a link in it." in doc.text
    (table,) = _block_text(doc, "table")
    # Cells are tab-separated, so the answerer can read the table as rows of cells.
    assert table.splitlines() == ["Stage\tBudget", "dense\t40 ms", "rerank\t120 ms"]
    (code,) = _block_text(doc, "code")
    assert code == 'ragmesh query "how does fusion work?"\n  --top-k 5'
    stages = doc.sections[1]
    assert stages.line_start == 15
    table_block = next(b for b in stages.blocks if b.kind == "table")
    assert (table_block.line_start, table_block.line_end) == (21, 25)


def test_pdf_pages(mixed_corpus: Path) -> None:
    doc = _parse(mixed_corpus, "manual.pdf", "pdf")
    assert doc.title == "Ragmesh Operator Manual"
    assert doc.page_count == 2
    assert [s.page for s in doc.sections] == [1, 2]
    assert all(b.line_start == 0 and b.line_end == 0 for s in doc.sections for b in s.blocks)
    page2 = doc.text[doc.sections[1].start : doc.sections[1].end]
    assert "50054" in page2 and "Rollback" not in page2


def test_pdf_chunks_never_span_pages() -> None:
    pages = [[f"Page {p} sentence {i} about indexing." for i in range(30)] for p in range(1, 4)]
    doc = parse_document("long.pdf", "pdf", minimal_pdf(pages))
    for strategy in ("heading", "split", "fixed"):
        config = ChunkingConfig(strategy=strategy, max_chars=300, min_chars=100, window_lines=8, overlap_lines=2)
        chunks = chunk_document(doc, corpus="c", config=config).chunks
        assert {c.page for c in chunks} == {1, 2, 3}
        for chunk in chunks:
            assert f"Page {chunk.page} " in chunk.text
            assert all(f"Page {p} " not in chunk.text for p in (1, 2, 3) if p != chunk.page)


def test_plain_text_paragraphs(mixed_corpus: Path) -> None:
    doc = _parse(mixed_corpus, "notes.txt", "text")
    assert doc.title == "notes"
    blocks = doc.sections[0].blocks
    assert [(b.line_start, b.line_end) for b in blocks] == [(1, 1), (3, 4), (6, 7)]


def test_crlf_and_lf_give_identical_structure(mixed_corpus: Path) -> None:
    crlf = (mixed_corpus / "guide/crlf.md").read_bytes()
    assert b"\r\n" in crlf
    a = parse_document("x.md", "markdown", crlf)
    b = parse_document("x.md", "markdown", crlf.replace(b"\r\n", b"\n"))
    assert a.text == b.text and a.sections == b.sections
