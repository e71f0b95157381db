"""The OpenAI route's citations: [S1] markers as Markdown links, each with a url_citation annotation
whose offsets index exactly that link in the whole content, however the text is cut into pieces."""

from __future__ import annotations

import pytest

from ragmesh_gateway.openai_chat.annotations import CitationLinker, markers_of_links, render_whole, url_citation

SOURCES = {"S1": ("Jobs", "http://rag.test/api/rag/v1/source/t@1/jobs.md?lines=2-3#L2"),
           "S2": ("Queues (durable)", "https://docs.example/queues (v2)")}


def lookup(source_id: str) -> tuple[str, str] | None:
    return SOURCES.get(source_id)


def streamed(pieces: list[str]) -> tuple[str, list]:
    linker = CitationLinker(lookup)
    out = [linker.feed(piece) for piece in pieces] + [linker.finish()]
    return "".join(p.text for p in out), [a for p in out for a in p.annotations]


def assert_in_range(content: str, annotations: list) -> None:
    for annotation in annotations:
        cited = annotation.url_citation
        assert 0 <= cited.start_index < cited.end_index <= len(content)
        link = content[cited.start_index:cited.end_index]
        assert link.startswith("[S") and link.endswith(")") and "](" in link


def test_markers_become_links_with_annotations_over_them() -> None:
    cited = render_whole("Jobs retry [S1]. Queues keep them [S2, S1].", lookup)
    assert cited.text == ("Jobs retry [S1](http://rag.test/api/rag/v1/source/t@1/jobs.md?lines=2-3#L2). Queues keep "
                          "them [S2](https://docs.example/queues%20%28v2%29), "
                          "[S1](http://rag.test/api/rag/v1/source/t@1/jobs.md?lines=2-3#L2).")
    assert [(a.url_citation.title, a.url_citation.url) for a in cited.annotations] == [
        SOURCES["S1"], SOURCES["S2"], SOURCES["S1"]]
    assert_in_range(cited.text, cited.annotations)
    assert cited.text[cited.annotations[1].url_citation.start_index:].startswith("[S2](")


@pytest.mark.parametrize("pieces", [
    ["Jobs retry [S1]."],
    ["Jobs retry [", "S1]. Más ", "ñ [S", "2", "]"],
    ["[S1]", "[S2]", " é [S1 , S2]"],
    ["emoji 😀 [S1]", " and [S9] unknown [S9, S2]."],
    ["", "[S1", "", "]", ""],
    ["no markers at all"],
    ["ends inside a marker [S1, S"],
])
def test_offsets_stay_inside_the_content_however_the_text_is_cut(pieces: list[str]) -> None:
    content, annotations = streamed(pieces)
    assert_in_range(content, annotations)
    # The same text whole gives the same content and annotations.
    whole = render_whole("".join(pieces), lookup)
    assert (whole.text, whole.annotations) == (content, annotations)


def test_a_marker_that_names_no_source_is_dropped_and_one_never_finished_is_kept_as_text() -> None:
    assert render_whole("A [S9]. B [S9, S1].", lookup).text == \
        f"A . B [S1]({SOURCES['S1'][1]})."
    content, annotations = streamed(["cut off [S1, S"])
    assert content == "cut off [S1, S" and annotations == []


def test_an_annotation_outside_its_text_is_refused() -> None:
    assert url_citation("abcd", 0, 4, title="t", url="u").url_citation.end_index == 4
    assert url_citation("abcd", 1, 3, title="t", url="u", offset=10).url_citation.start_index == 11
    for start, end in ((0, 5), (-1, 2), (3, 3), (4, 2)):
        with pytest.raises(ValueError, match="outside"):
            url_citation("abcd", start, end, title="t", url="u")


def test_links_sent_back_in_the_history_read_as_markers_again() -> None:
    assert markers_of_links(render_whole("Jobs retry [S1, S2].", lookup).text) == "Jobs retry [S1], [S2]."
