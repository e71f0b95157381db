"""An answer set on disk and how an answer to one of its questions is scored.

Part of bench/eval_answers.py; see there. An answer set is a folder with ``corpus/`` (the files to
index) and ``questions.jsonl``: ``{"id", "question", "answerable", "answers": [gold texts], "file"}``
(the corpus file holding the answer, ``null`` for unanswerable questions) and optionally ``kind``
(where the answer sits: table, list, code, ...), reported per kind.

Matching follows the answer set's own definition (xquad-en-qa SOURCE.md): SQuAD-style
normalisation — lower case, punctuation to spaces, white space collapsed — then the gold text
must occur in the answer *as whole words* (" 8 " is not found in " 18 "). ``[S#]`` markers are
dropped from the answer first.
"""

from __future__ import annotations

import hashlib
import json
import re
import statistics
import string
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

_CITATION = re.compile(r"\[\s*S\d+(?:\s*[,;]\s*S\d+)*\s*\]")
_PUNCTUATION = re.compile("[" + re.escape(string.punctuation + "“”‘’–—…·•") + "]")
SPLITS = ("all", "tune", "check")


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    answerable: bool
    answers: tuple[str, ...]
    file: str | None
    kind: str = ""


def load_questions(folder: Path) -> list[Question]:
    rows = []
    for line in (folder / "questions.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            rows.append(Question(row["id"], row["question"], bool(row["answerable"]), tuple(row.get("answers") or ()),
                                 row.get("file"), row.get("kind", "")))
    return rows


def split_of(question: Question) -> str:
    """``tune`` or ``check``: answerable questions by their file (every question about one article
    lands on the same side, so the check half holds articles never tuned on), unanswerable ones by
    their id. A digest, not the order in the file, so adding questions moves none."""
    key = question.file if question.answerable and question.file else question.id
    return "tune" if hashlib.sha256(key.encode()).digest()[0] % 2 == 0 else "check"


def normalize(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).lower()
    return " ".join(_PUNCTUATION.sub(" ", text).split())


def contains_gold(text: str, golds: tuple[str, ...]) -> bool:
    haystack = f" {normalize(_CITATION.sub(' ', text))} "
    return any(f" {normalize(g)} " in haystack for g in golds if normalize(g))


def answer_words(text: str) -> int:
    return len(normalize(_CITATION.sub(" ", text)).split())


@dataclass
class Outcome:
    question: Question
    status: str  # answered, insufficient_evidence, withheld, or error:<code>
    answer: str
    cited_texts: list[str]
    latency_ms: float
    cited_urls: list[str] = field(default_factory=list)
    first_token_ms: float | None = None  # to the first answer token; None when none came
    finish_reason: str = ""

    @property
    def answered(self) -> bool:
        return self.status == "answered"

    def record(self) -> dict:
        q = self.question
        return {"id": q.id, "kind": q.kind, "answerable": q.answerable, "question": q.question,
                "status": self.status, "answer": self.answer, "golds": list(q.answers),
                "answer_hit": q.answerable and self.answered and contains_gold(self.answer, q.answers),
                "citation_hit": q.answerable and any(contains_gold(t, q.answers) for t in self.cited_texts),
                "cited_urls": self.cited_urls, "latency_ms": round(self.latency_ms, 1),
                "first_token_ms": None if self.first_token_ms is None else round(self.first_token_ms, 1),
                "finish_reason": self.finish_reason}


def _share(hits: int, total: int) -> float | None:
    return round(hits / total, 4) if total else None


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)


def summarize(outcomes: list[Outcome]) -> dict:
    answerable = [o for o in outcomes if o.question.answerable]
    unanswerable = [o for o in outcomes if not o.question.answerable]
    answered = [o for o in outcomes if o.answered]
    words = [answer_words(o.answer) for o in answered]
    latencies = [o.latency_ms for o in outcomes]
    first_tokens = [o.first_token_ms for o in outcomes if o.first_token_ms is not None]
    summary = {
        "questions": len(outcomes), "answerable": len(answerable), "unanswerable": len(unanswerable),
        "answer_hit": _share(sum(o.record()["answer_hit"] for o in answerable), len(answerable)),
        "citation_hit": _share(sum(o.record()["citation_hit"] for o in answerable), len(answerable)),
        "false_refusal_rate": _share(sum(o.status == "insufficient_evidence" for o in answerable), len(answerable)),
        "refusal_rate_unanswerable": _share(sum(not o.answered for o in unanswerable), len(unanswerable)),
        "withheld_rate": _share(sum(o.status == "withheld" for o in outcomes), len(outcomes)),
        "errors": sum(o.status.startswith("error") for o in outcomes),
        "answer_words_mean": round(statistics.fmean(words), 1) if words else None,
        "answer_words_p50": _pct(words, 0.5), "answer_words_p95": _pct(words, 0.95),
        "first_token_ms_p50": _pct(first_tokens, 0.5), "first_token_ms_p95": _pct(first_tokens, 0.95),
        "latency_ms_p50": _pct(latencies, 0.5), "latency_ms_p95": _pct(latencies, 0.95),
    }
    kinds = sorted({o.question.kind for o in answerable if o.question.kind})
    if kinds:
        summary["answer_hit_by_kind"] = {
            kind: _share(sum(o.record()["answer_hit"] for o in answerable if o.question.kind == kind),
                         sum(o.question.kind == kind for o in answerable))
            for kind in kinds}
    return summary
