"""Answer a question by copying the evidence units that best match it, each with its citation.

Units (``units.py``) are sentences, table rows with their headers, list items, ``key: value``
lines and code lines. Each is scored against the question with the signals the runtime has::

    score = cosine(MiniLM(question), MiniLM(unit + its context))
          + lexical_weight × share of the question's terms in the unit (its context counts
            context_weight as much)
          - rank_weight × the source's position (sources arrive best-retrieved first)
          + previous_weight × share of the question's terms in the sentence before it, for a
            sentence that opens by pointing back at it ("It", "These", ...)
          - kind_penalty when the question asks for a number, date or name the unit does not hold,
            when the unit says nothing the question does not already say, or when it is a code
            line and the question does not ask how to do something

A question written mostly in Chinese is scored by character-bigram overlap alone, threshold
``cjk_min_overlap``: MiniLM was trained on English, and on Chinese its cosine ranks unrelated
sentences as high as related ones (measured on xquad-zh, see docs/runtime.md).

The answer is the best unit, then up to ``max_units`` - 1 more within ``score_margin`` of it,
each followed by `` [S#]``; a sentence that opens by pointing back ("These devices ...") is shown
after the sentence it points at. It is ``INSUFFICIENT_EVIDENCE`` when the best score is below
``min_score``, calibrated with the weights on the tuning halves of the answer sets
(bench/tune_answerer.py, docs/answers.md).

Nothing here reads evidence as instructions: text only ever gets scored and copied, so an
injected "ignore previous instructions" is just another sentence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ragmesh_runtime.encoder import MiniLmEncoder
from ragmesh_runtime.generator.coverage import missing_key_terms, unnamed_object_head
from ragmesh_runtime.generator.lexical import content_terms, overlap
from ragmesh_runtime.generator.prompt_protocol import EvidencePrompt
from ragmesh_runtime.generator.question_types import (
    answer_form,
    asks_for_code,
    asks_for_procedure,
    can_hold,
    expected_kind,
    extreme,
    holds_form,
)
from ragmesh_runtime.generator.table_extremes import extreme_row
from ragmesh_runtime.generator.word_neighbours import WordNeighbours
from ragmesh_runtime.generator.units import CODE_LINE, SENTENCE, TABLE_ROW, AnswerUnit, split_units
from ragmesh_runtime.settings import GeneratorSettings

INSUFFICIENT_EVIDENCE = "INSUFFICIENT_EVIDENCE"

_LATIN_WORD = re.compile(r"[A-Za-z0-9]+")
_CJK_CHAR = re.compile(r"[\u3400-\u9fff]")
_ANAPHOR = re.compile(r"^(?:It|Its|They|Their|Them|These|This|Those|That|He|His|She|Her|Such|The latter|"
                      r"The former|There|Here)\b")


@dataclass(frozen=True)
class Candidate:
    source_id: str
    rank: int  # position of its source in the prompt, 0 = best retrieved
    unit: AnswerUnit
    previous: str = ""  # the sentence before it in the same paragraph, when it is a sentence


@dataclass(frozen=True)
class ScoredUnit:
    source_id: str
    unit: AnswerUnit
    score: float
    cosine: float
    lexical: float
    anaphoric_previous: str = ""  # the sentence it points back at, shown before it
    own_lexical: float = 0.0  # share of the question's terms in the unit's own text
    off_kind: bool = False

    @property
    def text(self) -> str:
        return self.unit.text


@dataclass(frozen=True)
class UnitFeatures:
    candidate: Candidate
    cjk: bool
    cosine: float
    lexical: float  # share of the question's terms in the unit
    context_lexical: float  # share of the question's terms only in the unit's context
    previous_lexical: float  # share of the question's terms only in the sentence before it
    anaphoric: bool  # opens with a word pointing back at the sentence before ("It", "These")
    off_kind: bool  # cannot hold the kind of answer asked for, or only repeats the question


@dataclass(frozen=True)
class ExtractiveAnswer:
    text: str
    units: tuple[ScoredUnit, ...]  # the copied ones; empty when evidence is insufficient
    best_score: float | None  # None when there was nothing to score

    @property
    def sufficient(self) -> bool:
        return bool(self.units)


class ExtractiveAnswerer:
    def __init__(self, encoder: MiniLmEncoder, settings: GeneratorSettings,
                 word_neighbours: WordNeighbours | None = None) -> None:
        self._encoder = encoder
        self._settings = settings
        # Static word vectors for the coverage rule's paraphrases, loaded when first needed.
        self._word_neighbours = word_neighbours or WordNeighbours.shared()

    def answer(self, prompt: EvidencePrompt) -> ExtractiveAnswer:
        candidates = self.candidates(prompt)
        if not prompt.question or not candidates:
            return ExtractiveAnswer(INSUFFICIENT_EVIDENCE, (), None)
        return self.decide(prompt, self.score(prompt.question, candidates))

    def candidates(self, prompt: EvidencePrompt) -> list[Candidate]:
        """Units that could answer: no headings, no questions, no fragments, each once.

        At most ``max_evidence_units``, taken in source order: sources arrive best-ranked
        first, so a prompt too large to score whole loses its weakest evidence, not its best.
        """
        seen: set[str] = set()
        candidates: list[Candidate] = []
        limit = self._settings.max_evidence_units
        code = asks_for_code(prompt.question)
        for rank, source in enumerate(prompt.sources):
            before: AnswerUnit | None = None
            for unit in split_units(source.text, source.heading):
                previous = before.text if before and unit.kind == SENTENCE and before.kind == SENTENCE \
                    and before.block == unit.block else ""
                before = unit
                if unit.text in seen or not _answer_like(unit) or (unit.kind == CODE_LINE and not code):
                    continue
                if len(candidates) >= limit:
                    return candidates
                seen.add(unit.text)
                candidates.append(Candidate(source.id, rank, unit, previous))
        return candidates

    def threshold(self, question: str) -> float:
        return self._settings.cjk_min_overlap if is_mostly_cjk(question) else self._settings.min_score

    def score(self, question: str, candidates: list[Candidate]) -> list[ScoredUnit]:
        return [self.combine(f) for f in self.features(question, candidates)]

    def features(self, question: str, candidates: list[Candidate]) -> list[UnitFeatures]:
        """Every signal of every candidate, before weighting (bench/tune_answerer.py weighs
        these many ways without computing them again)."""
        cjk = is_mostly_cjk(question)
        # A table row, list item or code line is embedded with its heading, headers or lead-in,
        # which say what it is about; a sentence with its heading unless sentence_context is off.
        alone = not self._settings.sentence_context
        texts = [c.unit.text if alone and c.unit.kind == SENTENCE else c.unit.scored_text for c in candidates]
        vectors = self._encoder.embed([question, *texts], normalize=True)
        cosines = vectors[1:] @ vectors[0]
        question_terms = content_terms(question)
        kind = "" if cjk else expected_kind(question)
        procedural = asks_for_procedure(question)
        out = []
        for candidate, cosine in zip(candidates, cosines, strict=True):
            unit = candidate.unit
            own = content_terms(unit.text)
            context = content_terms(unit.context) - own if unit.context and not cjk else frozenset()
            out.append(UnitFeatures(
                candidate=candidate, cjk=cjk, cosine=float(cosine), lexical=overlap(question_terms, own),
                context_lexical=overlap(question_terms, context),
                previous_lexical=overlap(question_terms, content_terms(candidate.previous) - own)
                if candidate.previous else 0.0,
                anaphoric=bool(candidate.previous and _ANAPHOR.match(unit.text)),
                off_kind=bool(kind and not can_hold(kind, unit.text, question)) or bool(own and own <= question_terms)
                or (unit.kind == CODE_LINE and not procedural),
            ))
        return out

    def combine(self, f: UnitFeatures) -> ScoredUnit:
        settings = self._settings
        candidate = f.candidate
        lexical = f.lexical + settings.context_weight * f.context_lexical
        if f.anaphoric:
            lexical += settings.previous_weight * f.previous_lexical
        if f.cjk:
            score = f.lexical
        else:
            score = f.cosine + settings.lexical_weight * lexical - settings.rank_weight * candidate.rank
            if f.off_kind:
                score -= settings.kind_penalty
        return ScoredUnit(candidate.source_id, candidate.unit, score, f.cosine, lexical,
                          candidate.previous if f.anaphoric else "", f.lexical, f.off_kind)

    def decide(self, prompt: EvidencePrompt, scored: list[ScoredUnit]) -> ExtractiveAnswer:
        """The answer from scored candidates: the threshold, then the units to copy."""
        ranked = sorted(range(len(scored)), key=lambda i: (-scored[i].score, -scored[i].cosine, i))
        best = scored[ranked[0]]
        threshold = self.threshold(prompt.question)
        if best.score < threshold or self.uncovered(prompt) or self.formless(prompt) or self.unlinked(prompt, best):
            return ExtractiveAnswer(INSUFFICIENT_EVIDENCE, (), best.score)
        chosen = self._extreme_row(prompt.question, best, scored) or self._joined(
            prompt.question, best, [scored[i] for i in ranked[1:]], threshold)
        text = " ".join(f"{self._shown(unit)} [{unit.source_id}]" for unit in chosen)
        return ExtractiveAnswer(text, tuple(chosen), best.score)

    def uncovered(self, prompt: EvidencePrompt) -> list[str]:
        """The question's key terms that no source mentions (coverage.py): such a question is
        refused however well some unit matches its other words."""
        if is_mostly_cjk(prompt.question) or self._settings.max_missing_share >= 1.0:
            return []
        return missing_key_terms(prompt.question, _source_texts(prompt), self._settings.max_missing_share,
                                 self._word_neighbours.closest, self._settings.near_term_similarity,
                                 self._settings.require_object)

    def unlinked(self, prompt: EvidencePrompt, best: ScoredUnit) -> list[str]:
        """The head of the question's object when no source names it and the best unit shares only
        the question's names (coverage.py, ``unnamed_object_head``): "Who founded the company behind
        Tern?" against "Tern is licensed under the Apache License 2.0." is refused."""
        if not self._settings.require_object_head or is_mostly_cjk(prompt.question):
            return []
        return unnamed_object_head(prompt.question, best.unit.text, _source_texts(prompt),
                                   self._word_neighbours.closest, self._settings.near_term_similarity)

    def formless(self, prompt: EvidencePrompt) -> str:
        """The form of answer the question asks for (a price, a phone number, an email address)
        when no source holds anything of that form: such a question is refused, however well some
        unit matches its other words ("What does the enterprise licence cost?" against "Tern is
        licensed under the Apache License 2.0.")."""
        form = answer_form(prompt.question) if self._settings.require_answer_form else ""
        if not form or is_mostly_cjk(prompt.question):
            return ""
        return "" if any(holds_form(form, source.text) for source in prompt.sources) else form

    def _joined(self, question: str, best: ScoredUnit, rest: list[ScoredUnit], threshold: float) -> list[ScoredUnit]:
        """The best unit, then those that are relevant in their own right: near its score, near
        its cosine to the question (the shared heading of a section lifts every line of it alike),
        sharing enough of the question's terms in their own words, and holding the kind of answer
        asked for whenever the best one does. When the best unit is an entry of a list or table
        whose lead names what the question asks about ("indexer (...) owns ..."), it is the entry
        the documents keep for that: another entry of it about something else ("retrieval (...)
        owns ...") never joins, and another unit only with as many of the question's terms."""
        settings = self._settings
        floor = max(threshold, best.score - settings.score_margin)
        terms = content_terms(question)
        named = settings.join_same_entry and bool(content_terms(best.unit.lead) & terms)
        chosen = [best]
        for unit in rest:
            if len(chosen) >= settings.max_units or unit.score < floor:
                break
            if unit.cosine < best.cosine - settings.join_cosine_margin or unit.own_lexical < settings.join_min_lexical:
                continue
            if named and (unit.own_lexical < best.own_lexical
                          or _same_block(unit, best) and not content_terms(unit.unit.lead) & terms):
                continue
            if unit.off_kind and not best.off_kind:
                continue
            chosen.append(unit)
        return chosen

    def _extreme_row(self, question: str, best: ScoredUnit, scored: list[ScoredUnit]) -> list[ScoredUnit]:
        """For "which ... the longest/smallest ...?" answered from a table: the one row holding the
        extreme value of the column the question names, alone."""
        direction = extreme(question)
        if not direction or best.unit.kind != TABLE_ROW:
            return []
        table = [u for u in scored if u.source_id == best.source_id and u.unit.block == best.unit.block]
        row = extreme_row(question, [u.unit for u in table], direction)
        return [next(u for u in table if u.unit is row)] if row is not None else []

    def _shown(self, unit: ScoredUnit) -> str:
        """A sentence that points back ("These devices ...") is shown after the sentence it
        points at, which it needs to be understood."""
        if unit.anaphoric_previous and self._settings.previous_weight > 0:
            return f"{unit.anaphoric_previous} {unit.text}"
        return unit.text


def _source_texts(prompt: EvidencePrompt) -> list[str]:
    """Each source as the coverage rules read it: its title, heading and text."""
    return ["\n".join((source.title, source.heading, source.text)) for source in prompt.sources]


def _same_block(a: ScoredUnit, b: ScoredUnit) -> bool:
    return a.source_id == b.source_id and a.unit.block == b.unit.block and a.unit.kind == b.unit.kind


def is_mostly_cjk(text: str) -> bool:
    return len(_CJK_CHAR.findall(text)) > len(_LATIN_WORD.findall(text))


def _answer_like(unit: AnswerUnit) -> bool:
    text = unit.text
    if unit.kind == SENTENCE and text.rstrip("\"'”’」』）) ").endswith(("?", "？")):
        return False
    if unit.kind == SENTENCE and text.rstrip().endswith(":"):
        return False  # a lead-in ("Install it like this:"): what follows it is the answer
    return len(_LATIN_WORD.findall(text)) + len(_CJK_CHAR.findall(text)) >= (3 if unit.kind == SENTENCE else 2)
