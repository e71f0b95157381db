"""Answer a question by copying the evidence sentences that best match it, each with its citation.

score(sentence) = cosine(MiniLM(question), MiniLM(sentence)) + lexical_weight * term overlap,
threshold ``min_score``. A question written mostly in Chinese is scored by character-bigram
overlap alone, threshold ``cjk_min_overlap``: MiniLM was trained on English, and on Chinese its
cosine ranks unrelated sentences as high as related ones (measured on xquad-zh, see
docs/runtime.md), so it only breaks ties there.

The best 1..max_sentences sentences within ``score_margin`` of the top score are copied verbatim
(a line break inside one becomes a space), each followed by `` [S#]``. If even the top score is
below the threshold the answer is exactly ``INSUFFICIENT_EVIDENCE``.

Nothing here reads evidence as instructions: text only ever gets scored and copied, so an
injected "ignore previous instructions" is just another sentence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ragmesh_runtime.encoder import MiniLmEncoder
from ragmesh_runtime.generator.lexical import content_terms, overlap
from ragmesh_runtime.generator.prompt_protocol import EvidencePrompt
from ragmesh_runtime.generator.sentences import split_sentences
from ragmesh_runtime.settings import GeneratorSettings

INSUFFICIENT_EVIDENCE = "INSUFFICIENT_EVIDENCE"

_LATIN_WORD = re.compile(r"[A-Za-z0-9]+")
_LINE_BREAK = re.compile(r"[ \t]*\n\s*")
_CJK_CHAR = re.compile(r"[\u3400-\u9fff]")


@dataclass(frozen=True)
class ScoredSentence:
    source_id: str
    text: str
    score: float
    cosine: float
    lexical: float


@dataclass(frozen=True)
class ExtractiveAnswer:
    text: str
    sentences: tuple[ScoredSentence, ...]  # the copied ones; empty when evidence is insufficient
    best_score: float | None  # None when there was nothing to score

    @property
    def sufficient(self) -> bool:
        return bool(self.sentences)


class ExtractiveAnswerer:
    def __init__(self, encoder: MiniLmEncoder, settings: GeneratorSettings) -> None:
        self._encoder = encoder
        self._settings = settings

    def answer(self, prompt: EvidencePrompt) -> ExtractiveAnswer:
        candidates = self.candidates(prompt)
        if not prompt.question or not candidates:
            return ExtractiveAnswer(INSUFFICIENT_EVIDENCE, (), None)
        scored = self.score(prompt.question, candidates)
        ranked = sorted(range(len(scored)), key=lambda i: (-scored[i].score, -scored[i].cosine, i))
        best = scored[ranked[0]]
        threshold = self.threshold(prompt.question)
        if best.score < threshold:
            return ExtractiveAnswer(INSUFFICIENT_EVIDENCE, (), best.score)
        floor = max(threshold, best.score - self._settings.score_margin)
        chosen = [best]
        for index in ranked[1:]:
            if len(chosen) >= self._settings.max_sentences or scored[index].score < floor:
                break
            chosen.append(scored[index])
        text = " ".join(f"{_one_line(sentence.text)} [{sentence.source_id}]" for sentence in chosen)
        return ExtractiveAnswer(text, tuple(chosen), best.score)

    def candidates(self, prompt: EvidencePrompt) -> list[tuple[str, str]]:
        """(source id, sentence) pairs that could answer: no headings, no questions, no fragments.

        At most ``max_evidence_sentences``, taken in source order: sources arrive best-ranked
        first, so a prompt too large to score whole loses its weakest evidence, not its best.
        """
        seen: set[str] = set()
        candidates: list[tuple[str, str]] = []
        limit = self._settings.max_evidence_sentences
        for source in prompt.sources:
            for sentence in split_sentences(source.text):
                if sentence in seen or not _answer_like(sentence):
                    continue
                if len(candidates) >= limit:
                    return candidates
                seen.add(sentence)
                candidates.append((source.id, sentence))
        return candidates

    def threshold(self, question: str) -> float:
        return self._settings.cjk_min_overlap if is_mostly_cjk(question) else self._settings.min_score

    def score(self, question: str, candidates: list[tuple[str, str]]) -> list[ScoredSentence]:
        vectors = self._encoder.embed([question, *(text for _, text in candidates)], normalize=True)
        cosines = vectors[1:] @ vectors[0]
        question_terms = content_terms(question)
        cosine_weight = 0.0 if is_mostly_cjk(question) else 1.0
        lexical_weight = 1.0 if is_mostly_cjk(question) else self._settings.lexical_weight
        scored = []
        for (source_id, text), cosine in zip(candidates, cosines, strict=True):
            lexical = overlap(question_terms, content_terms(text))
            score = cosine_weight * float(cosine) + lexical_weight * lexical
            scored.append(ScoredSentence(source_id, text, score, float(cosine), lexical))
        return scored


def _one_line(sentence: str) -> str:
    """A sentence wrapped over lines, joined with single spaces: line ends would read as
    boundaries downstream and split the sentence from its citation."""
    return _LINE_BREAK.sub(" ", sentence)


def is_mostly_cjk(text: str) -> bool:
    return len(_CJK_CHAR.findall(text)) > len(_LATIN_WORD.findall(text))


def _answer_like(sentence: str) -> bool:
    if sentence.startswith("#") or sentence.rstrip("\"'”’」』）) ").endswith(("?", "？")):
        return False
    return len(_LATIN_WORD.findall(sentence)) + len(_CJK_CHAR.findall(sentence)) >= 3
