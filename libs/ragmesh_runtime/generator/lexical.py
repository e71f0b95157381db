"""Lexical overlap between a question and a sentence: the exact-term signal the embedding blurs.

English words are lower-cased, stop-word filtered and Snowball-stemmed; Chinese runs become
character bigrams (no word segmenter needed, and MiniLM's English vocabulary is weak on Chinese).
"""

from __future__ import annotations

import functools
import re

import snowballstemmer

_LATIN_WORD = re.compile(r"[a-z0-9]+(?:['’][a-z]+)?")
_CJK_RUN = re.compile(r"[\u3400-\u9fff]+")
_STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had
    has have having he her here hers herself him himself his how i if in into is it its itself just
    me more most my myself no nor not now of off on once only or other our ours ourselves out over
    same she should so some such than that the their theirs them themselves then there these
    they this those through to too under until up very was we were what when where which while who
    whom why will with would you your yours yourself yourselves s t don does doesn isn aren wasn""".split()
)
_CJK_STOP = frozenset("的了是在和与及或吗呢吧啊么什哪谁")


@functools.cache
def _stemmer():
    return snowballstemmer.stemmer("english")


def content_terms(text: str) -> frozenset[str]:
    lowered = text.lower()
    words = [w for w in _LATIN_WORD.findall(lowered) if w not in _STOPWORDS and (len(w) > 1 or w.isdigit())]
    terms = set(_stemmer().stemWords(words))
    for run in _CJK_RUN.findall(lowered):
        if len(run) == 1:
            terms.add(run)
        bigrams = (run[i : i + 2] for i in range(len(run) - 1))
        terms.update(b for b in bigrams if b[0] not in _CJK_STOP and b[1] not in _CJK_STOP)
    return frozenset(terms)


def overlap(question_terms: frozenset[str], sentence_terms: frozenset[str]) -> float:
    """Share of the question's terms the sentence contains, in [0, 1]."""
    if not question_terms:
        return 0.0
    return len(question_terms & sentence_terms) / len(question_terms)
