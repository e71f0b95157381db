"""Follow-up condensing: the deterministic rules, and the LLM condenser with its fallback."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from ragmesh_common.errors import ErrorCode, RagmeshError

from ragmesh_gateway.sessions.condense import SEPARATOR, condense, context_terms, looks_dependent
from ragmesh_gateway.sessions.llm_condenser import LlmCondenser
from ragmesh_gateway.sessions.ports import Turn

HISTORY = [
    Turn("user", "What is the default queue depth of the Quokka scheduler?"),
    Turn("assistant", "The default queue depth is forty-two jobs per worker.",
         ("Installing Quokka > Configuration",)),
]


@pytest.mark.parametrize("question", [
    "And how do I change it?",
    "what about its storage?",
    "How do I raise that?",
    "the default?",
    "Where are they stored?",
    "Also on macOS",
])
def test_dependent_questions_get_the_previous_terms_and_cited_heading(question: str) -> None:
    assert looks_dependent(question)
    condensed = condense(question, HISTORY)
    prefix, asked = condensed.split(SEPARATOR)
    assert asked == question
    words = prefix.split()
    assert {"queue", "depth", "Quokka", "scheduler", "Configuration"} <= set(words)
    # Stop words and pronouns never become search terms.
    assert not {"What", "is", "the", "of"} & set(words)


@pytest.mark.parametrize("question", [
    "How often do Quokka workers report heartbeats?",
    "Which Python version does the scheduler need on Linux?",
])
def test_standalone_questions_are_searched_as_asked(question: str) -> None:
    assert not looks_dependent(question)
    assert condense(question, HISTORY) == question


def test_no_history_means_no_rewrite() -> None:
    assert condense("And how do I change it?", []) == "And how do I change it?"


def test_terms_the_question_already_has_are_not_repeated() -> None:
    terms = context_terms(HISTORY, "how do I change the queue depth?")
    assert "queue" not in terms and "depth" not in terms and "Quokka" in terms


def test_chained_follow_ups_keep_the_topic() -> None:
    second = condense("And how do I change it?", HISTORY)
    history = [*HISTORY, Turn("user", second), Turn("assistant", "With the queue_depth key.")]
    third = condense("what about on macOS?", history)
    assert "Quokka" in third and "queue" in third


def test_chinese_follow_up_gets_the_previous_question() -> None:
    history = [Turn("user", "Quokka 调度器的默认队列深度是多少？"), Turn("assistant", "四十二。")]
    condensed = condense("它怎么修改？", history)
    assert condensed == "Quokka 调度器的默认队列深度是多少？" + SEPARATOR + "它怎么修改？"
    assert not looks_dependent("Quokka 调度器的默认队列深度是多少？")


@dataclass
class Delta:
    text: str


class ScriptedChat:
    def __init__(self, pieces: list[str] | Exception, *, hang: bool = False) -> None:
        self.pieces = pieces
        self.hang = hang
        self.messages: list[list[dict[str, str]]] = []
        self.closed = False

    async def stream_chat(self, messages, *, max_tokens: int):
        self.messages.append(messages)
        try:
            if self.hang:
                await asyncio.Event().wait()
            if isinstance(self.pieces, Exception):
                raise self.pieces
            for piece in self.pieces:
                yield Delta(piece)
        finally:
            self.closed = True


async def test_llm_condenser_uses_a_usable_rewrite() -> None:
    chat = ScriptedChat(["How do I change the ", "Quokka queue depth?"])
    fallbacks: list[int] = []
    condenser = LlmCondenser(chat, on_fallback=lambda: fallbacks.append(1))
    rewritten = await condenser.condense("And how do I change it?", HISTORY)
    assert rewritten == "How do I change the Quokka queue depth?"
    sent = chat.messages[0]
    assert sent[0]["role"] == "system" and sent[-1] == {"role": "user", "content": "And how do I change it?"}
    assert [m["role"] for m in sent[1:-1]] == ["user", "assistant"] and fallbacks == [] and chat.closed


@pytest.mark.parametrize("chat", [
    ScriptedChat(RagmeshError(ErrorCode.UNAVAILABLE, "down")),
    ScriptedChat(["INSUFFICIENT_EVIDENCE"]),  # the extractive CPU runtime cannot rewrite
    ScriptedChat(["line one\nline two"]),
    ScriptedChat(["x" * 500]),
    ScriptedChat([]),
    ScriptedChat(["never"], hang=True),
])
async def test_llm_condenser_falls_back_to_the_rules(chat: ScriptedChat) -> None:
    fallbacks: list[int] = []
    condenser = LlmCondenser(chat, timeout_s=0.05, on_fallback=lambda: fallbacks.append(1))
    result = await condenser.condense("And how do I change it?", HISTORY)
    assert result == condense("And how do I change it?", HISTORY) and fallbacks == [1]


async def test_llm_condenser_is_not_asked_without_history() -> None:
    chat = ScriptedChat(["unused"])
    assert await LlmCondenser(chat).condense(" standalone? ", []) == "standalone?"
    assert chat.messages == []


def test_only_the_section_the_answer_cited_first_adds_terms() -> None:
    history = [Turn("user", "Where are job results stored?"),
               Turn("assistant", "In SQLite.", ("Architecture > Storage", "Install > Troubleshooting"))]
    terms = context_terms(history, "what is its default?")
    assert "Storage" in terms and "Troubleshooting" not in terms
