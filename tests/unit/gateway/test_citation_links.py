"""Every citation url is a link a browser can follow."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ragmesh_common.errors import RagmeshError
from ragmesh_gateway.citations import citation_url
from ragmesh_gateway.files.source_view import parse_lines, render_source_view
from ragmesh_common.chunk_record import Chunk

CHUNK = Chunk(chunk_id="c", parent_id="p", doc_id="d", corpus="tern@main", library="tern", version="main",
              title="Jobs", heading_path=("Jobs", "Retries"), url="guide/jobs#retries", quote="q",
              source_path="guide/jobs.md", line_start=21, line_end=24,
              download_path="/api/rag/v1/files/tern@main/guide/jobs.md")


def test_the_corpus_site_url_is_kept_when_the_corpus_has_one() -> None:
    chunk = replace(CHUNK, url="https://docs.example.com/tern/guide/jobs#retries")
    assert citation_url(chunk) == "https://docs.example.com/tern/guide/jobs#retries"


def test_a_bare_slug_becomes_the_source_view_of_the_cited_lines() -> None:
    assert citation_url(CHUNK) == "/api/rag/v1/source/tern@main/guide/jobs.md?lines=21-24#L21"


def test_paths_are_percent_encoded_and_a_pdf_opens_at_its_page() -> None:
    spaced = replace(CHUNK, source_path="guide/jobs and queues.md")
    assert citation_url(spaced).startswith("/api/rag/v1/source/tern@main/guide/jobs%20and%20queues.md?")
    pdf = replace(CHUNK, source_path="manual.pdf", page=3, download_path="/api/rag/v1/files/tern@main/manual.pdf")
    assert citation_url(pdf) == "/api/rag/v1/files/tern@main/manual.pdf#page=3"


def test_without_lines_the_whole_file_is_opened() -> None:
    assert citation_url(replace(CHUNK, line_start=0, line_end=0)) == "/api/rag/v1/source/tern@main/guide/jobs.md"


def test_line_ranges_parse_or_are_refused() -> None:
    assert parse_lines("12") == (12, 12) and parse_lines("12-18") == (12, 18) and parse_lines(None) is None
    assert parse_lines("18-12") == (12, 18) and parse_lines("1-999999") == (1, 100_001)
    for bad in ("0", "a-b", "1-2-3", "-1", "1234567"):
        with pytest.raises(RagmeshError):
            parse_lines(bad)


def test_the_view_escapes_the_document_and_marks_only_the_cited_lines() -> None:
    page = render_source_view(title="t <b>", text="one\n<script>x</script>\nthree\n", raw_url="/raw", cited=(2, 3))
    assert "<script>" not in page and "&lt;script&gt;x&lt;/script&gt;" in page and "t &lt;b&gt;" in page
    assert page.count('class="line cited"') == 2 and page.count("<mark ") == 2 and "lines 2–3" in page
    assert '<span id="L1" class="line"><span class="n">1  </span><span class="t">one</span></span>' in page
