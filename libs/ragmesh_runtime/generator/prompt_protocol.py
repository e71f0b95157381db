"""The evidence prompt the generation service sends, parsed back into sources and a question.

Protocol (documented in docs/runtime.md). The last user message holds::

    <evidence>
    <source id="S1" title="..." heading="A > B">
    ...text, HTML-escaped (&amp; &lt; &gt;)...
    </source>
    ...
    </evidence>
    <question>the question, HTML-escaped</question>

System messages (instructions) and earlier turns are ignored: the answerer only copies evidence.
Because source text is escaped, a literal ``</source>`` or ``<question>`` inside a document
cannot close a tag or smuggle in a question; the parser still looks for the question only
outside the evidence block.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Sequence

from ragmesh_common.errors import ErrorCode, RagmeshError

_EVIDENCE = re.compile(r"<evidence>(.*?)</evidence>", re.DOTALL)
_SOURCE = re.compile(r"<source\b([^>]*)>(.*?)</source>", re.DOTALL)
_ATTRIBUTE = re.compile(r'([A-Za-z_][\w-]*)\s*=\s*"([^"]*)"')
_QUESTION = re.compile(r"<question>(.*?)</question>", re.DOTALL)


@dataclass(frozen=True)
class ChatTurn:
    role: str
    content: str


@dataclass(frozen=True)
class EvidenceSource:
    id: str
    title: str
    heading: str
    text: str


@dataclass(frozen=True)
class EvidencePrompt:
    sources: tuple[EvidenceSource, ...]
    question: str


def parse_evidence_prompt(turns: Sequence[ChatTurn]) -> EvidencePrompt:
    """Sources and question of the last user turn; no evidence block means no sources."""
    user_turns = [turn for turn in turns if turn.role == "user"]
    if not user_turns:
        raise RagmeshError(ErrorCode.INVALID_ARGUMENT, "messages must contain a user message")
    content = user_turns[-1].content

    evidence = _EVIDENCE.search(content)
    sources: list[EvidenceSource] = []
    outside = content
    if evidence is not None:
        sources = [_source(match) for match in _SOURCE.finditer(evidence.group(1))]
        sources = [source for source in sources if source.id]  # an uncitable source is no evidence
        outside = content[: evidence.start()] + content[evidence.end() :]

    questions = _QUESTION.findall(outside)
    # Without the tag, whatever the user wrote outside the evidence is the question.
    raw_question = questions[-1] if questions else outside
    return EvidencePrompt(sources=tuple(sources), question=html.unescape(raw_question).strip())


def _source(match: re.Match[str]) -> EvidenceSource:
    attributes = {name: html.unescape(value) for name, value in _ATTRIBUTE.findall(match.group(1))}
    return EvidenceSource(
        id=attributes.get("id", "").strip(),
        title=attributes.get("title", ""),
        heading=attributes.get("heading", ""),
        text=html.unescape(match.group(2)).strip(),
    )
