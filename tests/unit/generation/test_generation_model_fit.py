"""The answerer in front of a real model: support checks, post-hoc attribution, the prompt budget,
and models that stream nothing, garbage, or never stop (scripted streams)."""

from __future__ import annotations

from typing import AsyncIterator, Sequence

import httpx
import pytest
from test_generation_answerer import SETTINGS, SOURCES, ScriptedChatModel, collect, request

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_generation.answerer import GroundedAnswerer
from ragmesh_generation.budget import estimate_tokens
from ragmesh_generation.domain import AnswerStatus, EvidenceSource, HistoryTurn, PromptFit
from ragmesh_generation.openai_chat import OpenAIChatModel
from ragmesh_generation.ports import ModelDelta
from ragmesh_generation.settings import GenerationSettings
from test_generation_support import EVIDENCE


class SizedChatModel(ScriptedChatModel):
    """A scripted model that reports a context length and, optionally, counts tokens."""

    def __init__(self, *scripts, context: int | None = None, chars_per_token: float | None = None) -> None:
        super().__init__(*scripts)
        self.context = context
        self.chars_per_token = chars_per_token
        self.counted: list[str] = []

    async def context_tokens(self) -> int | None:
        return self.context

    async def count_tokens(self, texts: Sequence[str]) -> list[int] | None:
        if self.chars_per_token is None:
            return None
        self.counted += texts
        return [int(len(t) / self.chars_per_token) + 1 for t in texts]


async def fit_of(model, req=None, settings: GenerationSettings = SETTINGS) -> PromptFit:
    events = GroundedAnswerer(model, settings).answer(req or request(), time_remaining=None)
    first = await anext(events)
    await events.aclose()
    return first


def user_message(model: ScriptedChatModel, call: int = 0) -> str:
    return model.calls[call][-1]["content"]


# -- support ---------------------------------------------------------------------------------------

async def test_an_unsupported_cited_sentence_is_regenerated_then_withheld() -> None:
    ldap = "To configure LDAP login, set the LDAP_URL and LDAP_BASEDN in the config file. [S1][S3]"
    model = ScriptedChatModel([ldap], [ldap])
    tokens, sources, done = await collect(model, request("How do I configure LDAP login?", EVIDENCE))
    assert tokens == [] and sources == ()
    assert (done.answer_status, done.finish_reason) == (AnswerStatus.WITHHELD, "verification_failed")
    assert done.problems == ("unsupported_statement",)
    assert "a statement its cited sources do not support" in model.calls[1][0]["content"]


async def test_a_supported_answer_after_an_unsupported_one_is_sent() -> None:
    model = ScriptedChatModel(["Set LDAP_URL in the config file [S1]."], ["8 [S1]"])
    tokens, sources, done = await collect(model, request("How many jobs run at once by default?", EVIDENCE))
    assert tokens == ["8 [S1]"] and sources == ("S1",)
    assert (done.answer_status, done.attempts) == (AnswerStatus.ANSWERED, 2)


# -- post-hoc attribution ----------------------------------------------------------------------------

async def test_an_uncited_answer_its_sources_hold_is_cited_and_sent() -> None:
    model = ScriptedChatModel(["Drain every worker with `tern drain --all`. ",
                               "Then run the schema migration with `tern migrate`."])
    tokens, sources, done = await collect(model, request("How do I upgrade?", EVIDENCE))
    assert "".join(tokens) == ("Drain every worker with `tern drain --all`. [S2] Then run the schema migration "
                               "with `tern migrate`. [S2]")
    assert sources == ("S2",)
    assert (done.answer_status, done.repaired, done.attempts) == (AnswerStatus.ANSWERED, True, 1)
    assert len(model.calls) == 1


async def test_only_the_uncited_tail_is_attributed() -> None:
    model = ScriptedChatModel(["By default 8 jobs run at once [S1]. ", "A queue holds 500 jobs."])
    tokens, sources, done = await collect(model, request("Limits?", EVIDENCE))
    assert tokens == ["By default 8 jobs run at once [S1].", " A queue holds 500 jobs. [S1]"]
    assert done.repaired


async def test_an_uncited_answer_no_source_holds_is_not_attributed() -> None:
    model = ScriptedChatModel(["Drain every worker first. Hope this helps!"], ["8 [S1]"])
    tokens, _, done = await collect(model, request("How do I upgrade?", EVIDENCE))
    assert tokens == ["8 [S1]"]  # the first answer was regenerated, not half-cited
    assert (done.repaired, done.attempts) == (False, 2)


async def test_attribution_can_be_switched_off() -> None:
    model = ScriptedChatModel(["Drain every worker with `tern drain --all`."], ["Drain every worker."])
    settings = GenerationSettings(first_token_timeout_s=5.0, idle_timeout_s=0.2, attribution=False)
    tokens, _, done = await collect(model, request("How do I upgrade?", EVIDENCE), settings=settings)
    assert tokens == [] and done.answer_status is AnswerStatus.WITHHELD


class CutChatModel(ScriptedChatModel):
    """Each script ends at max_tokens (finish_reason "length"), not at the model's own stop."""

    async def stream(self, messages, *, max_tokens: int) -> AsyncIterator[ModelDelta]:  # noqa: ANN001
        self.calls.append(messages)
        for text in self.scripts[len(self.calls) - 1]:
            yield ModelDelta(text, None, self.model)
        yield ModelDelta("", "length", self.model)


async def test_a_length_cut_answer_is_not_attributed() -> None:
    # The answer ran out of tokens: its last sentence may be cut, and citing it would vouch for it.
    model = CutChatModel(["Drain every worker with `tern drain --all`."], ["Drain every worker with"])
    _, _, done = await collect(model, request("How do I upgrade?", EVIDENCE))
    assert done.answer_status is AnswerStatus.WITHHELD and not done.repaired
    assert len(model.calls) == 2


# -- the prompt budget ------------------------------------------------------------------------------

LONG = [EvidenceSource(f"S{i}", f"Doc {i}", "", "", f"Paragraph {i}. " + "The daemon keeps its state. " * 60)
        for i in range(1, 6)]


async def test_without_a_known_context_nothing_is_cut() -> None:
    fit = await fit_of(SizedChatModel(["x"]), request(sources=LONG))
    assert fit == PromptFit()


async def test_sources_that_do_not_fit_are_cut_then_dropped_and_said_so() -> None:
    model = SizedChatModel(["The daemon keeps its state [S1]."], context=2000)
    req = request("What does the daemon keep?", LONG)
    events = [e async for e in GroundedAnswerer(model, SETTINGS).answer(req, time_remaining=None)]
    fit = events[0]
    assert isinstance(fit, PromptFit)
    assert fit.context_tokens == 2000 and fit.counted_by == "estimate"
    assert fit.sources_cut and fit.sources_dropped
    assert set(fit.sources_cut) | set(fit.sources_dropped) | {"S1"} <= {s.source_id for s in LONG}
    sent = user_message(model)
    assert all(f'id="{i}"' not in sent for i in fit.sources_dropped)
    assert 'id="S1"' in sent  # rank order: the best source is kept whole
    # What was sent fits: the answer's room and the reserve stay free.
    total = sum(estimate_tokens(m["content"], SETTINGS.chars_per_token) + 8 for m in model.calls[0])
    assert total <= 2000 * 0.9 - 512  # the default max_tokens (512) and a tenth stay free
    assert 0 < fit.prompt_tokens <= 2000 * 0.9 - 512


async def test_a_citation_of_a_dropped_source_is_an_unknown_source() -> None:
    model = SizedChatModel([], context=2000)
    fit = await fit_of(model, request(sources=LONG))
    dropped = fit.sources_dropped[-1]
    model = SizedChatModel([f"The daemon keeps its state [{dropped}]."] * 1,
                           [f"The daemon keeps its state [{dropped}]."], context=2000)
    _, _, done = await collect(model, request(sources=LONG))
    assert done.answer_status is AnswerStatus.WITHHELD and done.problems == ("unknown_source",)


async def test_the_configured_context_wins_over_the_runtimes() -> None:
    settings = GenerationSettings(first_token_timeout_s=5.0, max_context_tokens=1500)
    fit = await fit_of(SizedChatModel(["x"], context=100_000), request(sources=LONG), settings)
    assert fit.context_tokens == 1500 and fit.sources_dropped


async def test_the_runtimes_tokenizer_is_asked_only_when_the_estimate_is_over() -> None:
    roomy = SizedChatModel(["x"], context=100_000, chars_per_token=4.0)
    assert (await fit_of(roomy, request(sources=LONG))).counted_by == "estimate"
    assert roomy.counted == []
    tight = SizedChatModel(["x"], context=2600, chars_per_token=4.0)
    fit = await fit_of(tight, request(sources=LONG))
    assert fit.counted_by == "tokenizer" and tight.counted
    # Exact counts (4 chars a token) fit more than the conservative estimate does.
    estimated = await fit_of(SizedChatModel(["x"], context=2600), request(sources=LONG))
    assert len(fit.sources_dropped) <= len(estimated.sources_dropped)


async def test_old_history_goes_before_the_question_is_refused() -> None:
    history = [HistoryTurn("user", "word " * 300), HistoryTurn("assistant", "reply " * 300)]
    model = SizedChatModel(["Run the installer with administrator rights [S1]."], context=1200)
    _, _, done = await collect(model, request(sources=SOURCES, history=history, max_tokens=100))
    assert done.answer_status is AnswerStatus.ANSWERED
    assert [m["role"] for m in model.calls[0]] == ["system", "user"]  # both old turns dropped


async def test_a_question_too_long_for_the_context_is_a_clear_error_before_any_event() -> None:
    model = SizedChatModel(["x"], context=900)
    events = GroundedAnswerer(model, SETTINGS).answer(request("why " * 900), time_remaining=None)
    with pytest.raises(RagmeshError) as raised:
        await anext(events)
    assert raised.value.code is ErrorCode.QUERY_TOO_LONG
    assert raised.value.details["context_tokens"] == 900
    assert model.calls == []


async def test_max_tokens_never_takes_more_than_half_the_context() -> None:
    model = SizedChatModel(["Run the installer with administrator rights [S1]."], context=3000)
    recorded: list[int] = []
    original = model.stream

    def stream(messages, *, max_tokens):  # noqa: ANN001, ANN202 - records the cap it was given
        recorded.append(max_tokens)
        return original(messages, max_tokens=max_tokens)

    model.stream = stream  # type: ignore[method-assign]
    await collect(model, request(max_tokens=2000))
    assert recorded == [1500]


# -- models that misbehave --------------------------------------------------------------------------

class EndlessChatModel(ScriptedChatModel):
    """Streams text forever and never sends a finish reason (ignores max_tokens)."""

    async def stream(self, messages, *, max_tokens: int) -> AsyncIterator[ModelDelta]:  # noqa: ANN001
        self.calls.append(messages)
        while True:
            yield ModelDelta("and so on and so on ", None, self.model)


async def test_a_model_that_never_stops_is_stopped_and_withheld() -> None:
    model = EndlessChatModel()
    tokens, _, done = await collect(model, request(max_tokens=50))
    assert tokens == []
    assert (done.answer_status, done.error_code) == (AnswerStatus.WITHHELD, "RUNTIME_ERROR")
    assert done.degraded == ("generation",)
    assert "max_tokens" in done.error_message


class SilentChatModel(ScriptedChatModel):
    """Opens the stream and closes it without a single delta, not even a finish reason."""

    async def stream(self, messages, *, max_tokens: int) -> AsyncIterator[ModelDelta]:  # noqa: ANN001
        self.calls.append(messages)
        return
        yield  # pragma: no cover - makes this an async generator


async def test_a_model_that_streams_nothing_is_withheld() -> None:
    tokens, _, done = await collect(SilentChatModel())
    assert tokens == []
    assert (done.answer_status, done.error_code) == (AnswerStatus.WITHHELD, "RUNTIME_ERROR")
    assert "empty stream" in done.error_message


@pytest.mark.parametrize("garbage", [
    "<evidence>\n<source id=\"S1\" title=\"Install\">Run the installer",  # the prompt echoed back
    "sudo upgrade tern sudo upgrade tern sudo upgrade tern",
    "\x00\x01\ufffd\ufffd [S1]",
    "[S1][S2][S1][S2]",
])
async def test_garbage_never_reaches_the_caller(garbage: str) -> None:
    model = ScriptedChatModel([garbage], [garbage])
    tokens, sources, done = await collect(model)
    assert tokens == [] and sources == ()
    assert (done.answer_status, done.finish_reason) == (AnswerStatus.WITHHELD, "verification_failed")
    assert done.degraded == ("generation",)


# -- the OpenAI-compatible adapter ------------------------------------------------------------------

def adapter(handler) -> OpenAIChatModel:  # noqa: ANN001
    class _Client:
        async def close(self) -> None:
            return None

    http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return OpenAIChatModel(_Client(), base_url="http://runtime.test/v1", http=http)  # type: ignore[arg-type]


@pytest.mark.parametrize(("card", "expected"), [
    ({"id": "m", "max_model_len": 4096}, 4096),  # vLLM (and the CPU runtime)
    ({"id": "m", "meta": {"n_ctx": 2048, "n_ctx_train": 8192}}, 2048),  # llama.cpp: the served context
    ({"id": "m"}, None),
    ({"id": "m", "max_model_len": "lots"}, None),
])
async def test_the_context_length_is_read_from_the_model_card(card: dict, expected: int | None) -> None:
    model = adapter(lambda r: httpx.Response(200, json={"object": "list", "data": [card]}))
    assert await model.context_tokens() == expected
    await model.close()


@pytest.mark.parametrize(("status", "body", "expected"), [
    (200, {"tokens": [1, 2, 3]}, [3]),  # llama.cpp
    (200, {"count": 5, "max_model_len": 4096, "tokens": [1, 2, 3, 4, 5]}, [5]),  # vLLM
    (422, {"code": "MALFORMED_BODY"}, None),  # the CPU runtime's TEI /tokenize wants "inputs"
    (404, {}, None),
])
async def test_token_counts_come_from_the_runtimes_tokenize(status: int, body: dict, expected) -> None:
    seen: list[httpx.Request] = []

    def handler(r: httpx.Request) -> httpx.Response:
        seen.append(r)
        return httpx.Response(status, json=body)

    model = adapter(handler)
    assert await model.count_tokens(["hello world"]) == expected
    assert str(seen[0].url) == "http://runtime.test/tokenize"
    if expected is None:  # asked once, then known to have none
        assert await model.count_tokens(["again"]) is None and len(seen) == 1
    await model.close()
