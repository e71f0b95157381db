"""A plain OpenAI client against the whole mesh: the official `openai` SDK gets its citations as
`url_citation` annotations whose absolute urls open the gateway's source view with the cited lines
marked, and a streamed answer of several cited sentences arrives in several content chunks."""

from __future__ import annotations

import re

import httpx
import openai
import pytest

pytestmark = pytest.mark.e2e

# The extractive generator answers this with three cited units of two files (three segments, each
# verified and released on its own).
QUESTION = [{"role": "user", "content": "What does a Quokka worker do?"}]
_CITED_LINE = re.compile(r'<mark id="L(\d+)" class="line cited">')  # the view marks cited lines <mark>


def client_for(mesh) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{mesh.gateway_url}/v1", api_key="unused", max_retries=0, timeout=120)


def assert_annotations_index_their_links(content: str, annotations: list[dict], origin: str) -> None:
    assert annotations, content
    for annotation in annotations:
        cited = annotation["url_citation"]
        assert annotation["type"] == "url_citation" and cited["url"].startswith(f"{origin}/")
        assert 0 <= cited["start_index"] < cited["end_index"] <= len(content)
        link = content[cited["start_index"]:cited["end_index"]]
        assert re.fullmatch(r"\[S\d+\]\(.+\)", link) and link.endswith(f"({cited['url']})"), link


def test_annotation_urls_open_the_source_view_with_the_cited_lines_marked(mesh) -> None:
    with client_for(mesh) as client:
        completion = client.chat.completions.create(model="ragmesh", messages=QUESTION)
    message = completion.choices[0].message
    annotations = [a.model_dump() for a in message.annotations or []]
    assert_annotations_index_their_links(message.content, annotations, mesh.gateway_url)
    assert not re.search(r"\[S\d+\](?!\()", message.content)  # every marker is a link now
    sources = {s["url"]: s for s in completion.model_extra["ragmesh"]["sources"]}
    with httpx.Client(timeout=60) as http:
        for annotation in message.annotations:
            url = annotation.url_citation.url
            page = http.get(url)
            assert page.status_code == 200, (url, page.status_code)
            start, end = sources[url]["source_lines"]
            marked = [int(n) for n in _CITED_LINE.findall(page.text)]
            assert marked == list(range(start, end + 1)), (url, marked)


def test_a_streamed_answer_arrives_piece_by_piece_with_its_annotations(mesh) -> None:
    with client_for(mesh) as client:
        stream = client.chat.completions.create(model="ragmesh", messages=QUESTION, stream=True)
        deltas = [c.choices[0].delta for c in stream if c.choices and c.choices[0].delta.content]
    content = "".join(d.content for d in deltas)
    annotations = [a for d in deltas for a in (d.model_extra or {}).get("annotations", [])]
    assert len(deltas) > 1, content
    assert [a["index"] for a in annotations] == list(range(len(annotations)))
    assert_annotations_index_their_links(content, annotations, mesh.gateway_url)
