"""POST /v1/chat/completions and GET /v1/models through the official `openai` client (its own
request building, response models and streaming parser), against a real uvicorn.

The grounded answer is the same as /chat's: same search, generator, citation checks, ACL and
limits. Each [S1] marker of the text is a Markdown link [S1](url) with a `url_citation` annotation
over it (`message.annotations`, the SDK's own type); the sources ride in the `ragmesh` extension too.
"""

from __future__ import annotations

import logging

import httpx
import openai
import pytest

from ragmesh_common.answer_defaults import ANSWER_SOURCES
from ragmesh_common.errors import ErrorCode, RagmeshError

from openai.types.chat.chat_completion_message import Annotation

from gateway_mesh import Mesh
from loopback_server import serve
from gateway_tokens import INTERNAL, bearer, schema, token_app, tokens, with_internal_corpus  # noqa: F401
from ragmesh_gateway.app import create_app
from ragmesh_gateway.chat.service import REFUSAL_TEXT
from test_chat_stream import ScriptedGeneration, done, generation, token  # noqa: F401 - fixture

QUESTION = [{"role": "user", "content": "how do I start?"}]
ANSWER = "Grounded answer [S1](https://docs.example/page6)."


_OPEN: list[openai.AsyncOpenAI] = []


def client_for(url: str, api_key: str = "unused") -> openai.AsyncOpenAI:
    client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key=api_key, max_retries=0, timeout=30)
    _OPEN.append(client)
    return client


@pytest.fixture(autouse=True)
async def close_openai_clients():
    yield
    while _OPEN:
        await _OPEN.pop().close()


@pytest.fixture
async def url(mesh: Mesh):
    async with serve(create_app(mesh.settings())) as base_url:
        yield base_url


async def test_models_are_one_per_readable_corpus_plus_one_for_all(url: str) -> None:
    models = await client_for(url).models.list()
    assert [m.id for m in models.data] == ["ragmesh", "ragmesh/docs@1"]
    assert all(m.object == "model" and m.owned_by == "ragmesh" for m in models.data)
    one = await client_for(url).models.retrieve("ragmesh/docs@1")
    assert one.id == "ragmesh/docs@1"


async def test_a_grounded_answer_with_its_sources(url: str, mesh: Mesh) -> None:
    completion = await client_for(url).chat.completions.create(model="ragmesh", messages=QUESTION)
    choice = completion.choices[0]
    assert completion.object == "chat.completion" and completion.model == "ragmesh"
    assert choice.message.role == "assistant" and choice.message.content == ANSWER
    assert choice.finish_reason == "stop"
    assert completion.usage.completion_tokens > 0
    extension = completion.model_extra["ragmesh"]
    assert extension["answer_status"] == "answered" and extension["request_id"]
    (source,) = extension["sources"]
    assert source["source_id"] == "S1" and source["url"] == "https://docs.example/page6"
    assert source["quote"] == "quote number 6" and source["source_lines"] == [6, 9]
    assert source["index_version"] == "v1" and source["trust"] == "untrusted"
    assert extension["security"]["trust"] == "untrusted"
    assert mesh.generation.requests[-1].question == "how do I start?"


async def test_the_stream_through_the_openai_parser(url: str) -> None:
    stream = await client_for(url).chat.completions.create(
        model="ragmesh", messages=QUESTION, stream=True, stream_options={"include_usage": True}
    )
    chunks = [chunk async for chunk in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finishing = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert text == ANSWER
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in finishing] == ["stop"]
    # The sources come with the finishing chunk, after every piece of text they explain.
    sources = finishing[0].model_extra["ragmesh"]["sources"]
    assert [s["source_id"] for s in sources] == ["S1"]
    assert chunks[-1].usage is not None and chunks[-1].choices == []
    assert len({c.id for c in chunks}) == 1 and {c.object for c in chunks} == {"chat.completion.chunk"}


@pytest.fixture
def viewable(mesh: Mesh, tmp_path) -> dict:
    """docs@1 as a corpus indexed without a url base: its chunks carry no url of their own, so each
    citation opens the gateway's source view of the file (under tmp_path) at the cited lines."""
    root = tmp_path / "docs"
    (root / "guide").mkdir(parents=True)
    for chunk in mesh.retrieval.chunks:
        (root / chunk.source_path).write_text("".join(f"line {i}\n" for i in range(1, 13)), encoding="utf-8")
        chunk.url = chunk.source_path.removesuffix(".md")
    return {"corpus_roots": {"docs@1": str(root)}}


def view_of(url: str, page: int) -> str:
    return f"{url}/api/rag/v1/source/docs@1/guide/page{page}.md?lines={page}-{page + 3}#L{page}"


def assert_links(content: str, annotations: list[dict]) -> None:
    """Each annotation is inside the content and spans exactly the link it describes."""
    for annotation in annotations:
        cited = annotation["url_citation"]
        assert annotation["type"] == "url_citation"
        assert 0 <= cited["start_index"] < cited["end_index"] <= len(content)
        link = content[cited["start_index"]:cited["end_index"]]
        assert link.startswith("[S") and link.endswith(f"]({cited['url']})"), (link, cited)


async def test_citations_are_url_citation_annotations_whose_urls_open_the_cited_lines(
    mesh: Mesh, viewable: dict
) -> None:
    async with serve(create_app(mesh.settings(**viewable))) as url:
        completion = await client_for(url).chat.completions.create(model="ragmesh", messages=QUESTION)
        message = completion.choices[0].message
        (annotation,) = message.annotations
        async with httpx.AsyncClient(timeout=10) as http:
            page = await http.get(annotation.url_citation.url)
    view = view_of(url, 6)
    assert isinstance(annotation, Annotation) and annotation.type == "url_citation"
    assert (annotation.url_citation.url, annotation.url_citation.title) == (view, "Page 6")
    assert message.content == f"Grounded answer [S1]({view})."
    assert_links(message.content, [annotation.model_dump()])
    assert completion.model_extra["ragmesh"]["sources"][0]["url"] == view
    assert page.status_code == 200 and page.text.count('class="line cited"') == 4


async def test_the_stream_sends_each_verified_piece_with_the_annotations_of_its_links(
    mesh: Mesh, viewable: dict, generation
) -> None:
    double, address = generation
    pieces = ["Jobs retry three times [S1]. ", "The queue is durable [S2, S1].", " It is in [S"]
    answer = "".join(pieces) + "3]."
    double.script = [*map(token, pieces), 0.05, token("3]."),
                     done(answer_status="answered", model="scripted", finish_reason="stop", answer=answer)]
    async with serve(create_app(mesh.settings(generation_addr=address, **viewable))) as url:
        client = client_for(url)
        stream = await client.chat.completions.create(model="ragmesh", messages=QUESTION, stream=True)
        chunks = [chunk async for chunk in stream]
        # The SDK's stream helper gathers the streamed annotations into the message, typed.
        async with client.chat.completions.stream(model="ragmesh", messages=QUESTION) as helper:
            final = await helper.get_final_completion()
    content_chunks = [c.choices[0].delta for c in chunks if c.choices and c.choices[0].delta.content]
    content = "".join(delta.content for delta in content_chunks)
    streamed = [a for delta in content_chunks for a in (delta.model_extra or {}).get("annotations", [])]
    # One chunk per piece the generator released, as it came; a marker cut by the stream waited for its end.
    assert [d.content for d in content_chunks] == [
        f"Jobs retry three times [S1]({view_of(url, 6)}). ",
        f"The queue is durable [S2]({view_of(url, 5)}), [S1]({view_of(url, 6)}).",
        " It is in ",
        f"[S3]({view_of(url, 4)}).",
    ]
    assert [a["index"] for a in streamed] == [0, 1, 2, 3]
    assert_links(content, streamed)
    assert [a["url_citation"]["title"] for a in streamed] == ["Page 6", "Page 5", "Page 6", "Page 4"]
    message = final.choices[0].message
    assert message.content == content
    assert [a.url_citation.model_dump() for a in message.annotations] == [a["url_citation"] for a in streamed]


async def test_a_corpus_model_searches_that_corpus_only(url: str, mesh: Mesh) -> None:
    await client_for(url).chat.completions.create(model="ragmesh/docs@1", messages=QUESTION)
    assert list(mesh.retrieval.searches[-1].filters.corpora) == ["docs@1"]


async def test_earlier_turns_are_the_conversation_history(url: str, mesh: Mesh) -> None:
    messages = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What is the scheduler?"},
        {"role": "assistant", "content": "It runs jobs [S1]."},
        {"role": "user", "content": "And its queue?"},
        # An earlier answer of this route, as a client sends it back: its citations are links.
        {"role": "assistant", "content": "It holds jobs [S2](http://127.0.0.1:8080/api/rag/v1/source/d/q.md#L1)."},
        {"role": "user", "content": "How do I configure it?"},
    ]
    await client_for(url).chat.completions.create(model="ragmesh", messages=messages)
    sent = mesh.generation.requests[-1]
    assert [(t.role, t.content) for t in sent.history] == [
        ("user", "What is the scheduler?"), ("assistant", "It runs jobs."),
        ("user", "And its queue?"), ("assistant", "It holds jobs.")]


async def test_no_evidence_is_an_ordinary_message_that_says_so(mesh: Mesh) -> None:
    mesh.retrieval.chunks = []
    async with serve(create_app(mesh.settings())) as url:
        completion = await client_for(url).chat.completions.create(model="ragmesh", messages=QUESTION)
        stream = await client_for(url).chat.completions.create(model="ragmesh", messages=QUESTION, stream=True)
        streamed = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert completion.choices[0].message.content == REFUSAL_TEXT == streamed
    assert completion.choices[0].finish_reason == "stop"
    assert completion.model_extra["ragmesh"]["answer_status"] == "insufficient_evidence"
    assert mesh.generation.requests == []


async def test_a_withheld_answer_says_so_and_lists_what_was_found(mesh: Mesh, generation) -> None:
    double, address = generation
    double.script = [done(answer_status="withheld", model="scripted", finish_reason="verification_failed",
                          degraded=["generation"])]
    async with serve(create_app(mesh.settings(generation_addr=address))) as url:
        completion = await client_for(url).chat.completions.create(model="ragmesh", messages=QUESTION)
    message = completion.choices[0].message.content
    assert "withheld" in message.lower() and "https://docs.example/page6" in message
    extension = completion.model_extra["ragmesh"]
    assert extension["answer_status"] == "withheld" and extension["sources_basis"] == "retrieved"
    assert extension["degraded"] == ["generation"]


async def test_generation_down_says_generation_is_unavailable_and_lists_what_was_found(mesh: Mesh) -> None:
    """As /chat with generation down (test_api_chat): the retrieval summary, withheld, flagged
    ``generation``, finish_reason ``generation_unavailable``. Before: the message said the answer
    "could not be verified", which is what a withheld *generated* answer means, not an outage."""
    await mesh.stop("generation")
    async with serve(create_app(mesh.settings())) as url:
        completion = await client_for(url).chat.completions.create(model="ragmesh", messages=QUESTION)
        stream = await client_for(url).chat.completions.create(model="ragmesh", messages=QUESTION, stream=True)
        chunks = [chunk async for chunk in stream]
    message = completion.choices[0].message.content
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == message
    assert "answer generation is unavailable" in message.lower() and "verified" not in message.lower()
    assert "https://docs.example/page6" in message
    assert completion.choices[0].finish_reason == "stop"
    finishing = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    for extension in (completion.model_extra["ragmesh"], finishing[0].model_extra["ragmesh"]):
        assert (extension["answer_status"], extension["finish_reason"]) == ("withheld", "generation_unavailable")
        assert extension["degraded"] == ["generation"] and extension["sources_basis"] == "retrieved"
        assert [s["source_id"] for s in extension["sources"]] == [f"S{i}" for i in range(1, ANSWER_SOURCES + 1)]


async def test_a_generator_failure_is_an_openai_error(mesh: Mesh, generation) -> None:
    double, address = generation
    double.script = [token("Half an "), RagmeshError(ErrorCode.RUNTIME_ERROR, "the model runtime failed")]
    async with serve(create_app(mesh.settings(generation_addr=address))) as url:
        with pytest.raises(openai.APIStatusError) as whole:
            await client_for(url).chat.completions.create(model="ragmesh", messages=QUESTION)
        stream = await client_for(url).chat.completions.create(model="ragmesh", messages=QUESTION, stream=True)
        received = []
        with pytest.raises(openai.APIError) as streamed:
            async for chunk in stream:
                received.append(chunk)
    assert whole.value.status_code == 502 and whole.value.code == "RUNTIME_ERROR"
    assert "".join(c.choices[0].delta.content or "" for c in received if c.choices) == "Half an "
    assert "RUNTIME_ERROR" in str(streamed.value) or streamed.value.code == "RUNTIME_ERROR"


@pytest.mark.parametrize(
    ("options", "param", "code"),
    [
        ({"extra_body": {"colour": "blue"}}, "colour", "UNKNOWN_FIELD"),
        ({"n": 2}, "n", "INVALID_ARGUMENT"),
        ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]},
         "tools", "INVALID_ARGUMENT"),
        ({"messages": [{"role": "user", "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}]}, "messages", "INVALID_ARGUMENT"),
        ({"messages": []}, "messages", "INVALID_ARGUMENT"),
        ({"messages": [{"role": "assistant", "content": "hi"}]}, "messages", "INVALID_ARGUMENT"),
        ({"messages": [{"role": "user", "content": "   "}]}, "messages", "QUERY_EMPTY"),
        ({"messages": [{"role": "user", "content": "x" * 2001}]}, "messages", "QUERY_TOO_LONG"),
        ({"response_format": {"type": "json_object"}}, "response_format", "INVALID_ARGUMENT"),
        ({"logprobs": True}, "logprobs", "INVALID_ARGUMENT"),
        ({"max_tokens": 0}, "max_tokens", "INVALID_ARGUMENT"),
        ({"temperature": "hot"}, "temperature", "MALFORMED_BODY"),
    ],
)
async def test_requests_the_model_cannot_honour_are_400s_with_the_param(
    url: str, options: dict, param: str, code: str, caplog
) -> None:
    caplog.set_level(logging.DEBUG)
    arguments = {"model": "ragmesh", "messages": QUESTION, **options}
    with pytest.raises(openai.BadRequestError) as refused:
        await client_for(url).chat.completions.create(**arguments)
    assert not [r for r in caplog.records if r.exc_info], "bad input left a traceback in the log"
    error = refused.value.body
    assert refused.value.status_code == 400
    assert error["param"] == param and error["code"] == code and error["type"] == "invalid_request_error"
    assert error["message"]


async def test_sampling_options_that_change_nothing_are_accepted(url: str) -> None:
    completion = await client_for(url).chat.completions.create(
        model="ragmesh", messages=QUESTION, temperature=0.2, top_p=0.9, seed=7, user="u-1",
        presence_penalty=0.0, frequency_penalty=0.0, max_completion_tokens=200, stop=None, tool_choice="none",
    )
    assert completion.choices[0].message.content == ANSWER


async def test_an_unknown_model_is_model_not_found(url: str) -> None:
    with pytest.raises(openai.NotFoundError) as missing:
        await client_for(url).chat.completions.create(model="gpt-4o", messages=QUESTION)
    assert missing.value.body["code"] == "model_not_found" and missing.value.body["param"] == "model"


async def test_malformed_json_gets_an_openai_error_body(url: str) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.post(f"{url}/v1/chat/completions", content=b"{nope",
                                   headers={"content-type": "application/json"})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "MALFORMED_BODY"


async def test_tokens_scopes_and_corpus_acl_are_those_of_chat(mesh: Mesh, pg_url, schema, tokens) -> None:
    with_internal_corpus(mesh, chunks=2)
    async with serve(token_app(mesh, pg_url, schema, allow_anonymous=False)) as url:
        granted = [m.id for m in (await client_for(url, tokens["granted"]).models.list()).data]
        asker = [m.id for m in (await client_for(url, tokens["asker"]).models.list()).data]
        async with httpx.AsyncClient(timeout=10) as http:
            no_key = await http.post(f"{url}/v1/chat/completions", json={"model": "ragmesh", "messages": QUESTION})
        with pytest.raises(openai.AuthenticationError) as bad_key:
            await client_for(url, "rmk_0000000000000000_wrong").chat.completions.create(
                model="ragmesh", messages=QUESTION)
        with pytest.raises(openai.PermissionDeniedError) as no_scope:
            await client_for(url, tokens["reader"]).chat.completions.create(model="ragmesh", messages=QUESTION)
        with pytest.raises(openai.NotFoundError) as hidden:
            await client_for(url, tokens["asker"]).chat.completions.create(
                model=f"ragmesh/{INTERNAL}", messages=QUESTION)
        with pytest.raises(openai.NotFoundError) as ghost:
            await client_for(url, tokens["asker"]).chat.completions.create(
                model="ragmesh/ghost@1", messages=QUESTION)
        answered = await client_for(url, tokens["granted"]).chat.completions.create(
            model=f"ragmesh/{INTERNAL}", messages=QUESTION)
    assert granted == ["ragmesh", "ragmesh/docs@1", f"ragmesh/{INTERNAL}"]
    assert asker == ["ragmesh", "ragmesh/docs@1"]
    assert no_key.status_code == 401 and no_key.headers["www-authenticate"] == 'Bearer realm="ragmesh"'
    assert no_key.json()["error"]["code"] == "UNAUTHENTICATED" and no_key.json()["error"]["type"] == "authentication_error"
    assert bad_key.value.body["code"] == "UNAUTHENTICATED" and bad_key.value.body["message"]
    assert no_scope.value.body["code"] == "PERMISSION_DENIED"
    # A corpus the caller may not read is a model that does not exist.
    assert hidden.value.body["message"].replace(INTERNAL, "X") == ghost.value.body["message"].replace("ghost@1", "X")
    assert answered.model_extra["ragmesh"]["sources"][0]["corpus"] == INTERNAL


async def test_the_chat_rate_limit_applies(mesh: Mesh, redis_url: str) -> None:
    import uuid

    settings = mesh.settings(rate_limits="chat=0.01/1,*=100/100", redis_url=redis_url,
                             rate_limit_prefix=f"ragmesh:test:{uuid.uuid4().hex[:12]}")
    async with serve(create_app(settings)) as url:
        await client_for(url).chat.completions.create(model="ragmesh", messages=QUESTION)
        with pytest.raises(openai.RateLimitError) as limited:
            await client_for(url).chat.completions.create(model="ragmesh", messages=QUESTION)
    assert limited.value.body["code"] == "RATE_LIMITED"
    assert int(limited.value.response.headers["retry-after"]) >= 1
