"""Whether the sources a sentence cites support what it says, and which source holds a sentence.

A citation marker proves nothing by itself: `... set LDAP_URL in the config file. [S1][S3]` cites
two real sources that never mention LDAP. A cited sentence is *supported* when

- every **exact term** in it is found in the text of a source it cites: numbers (``1,000`` and
  ``1000`` are the same number; spelled-out numbers in a source count, ``forty-two`` is 42),
  inline code spans, identifiers (``max_parallel``, ``tern.toml``, ``/etc/tern``), acronyms
  (``LDAP``) and capitalised names inside the sentence (``Tern``, ``PostgreSQL``); and
- at least ``MIN_WORD_SUPPORT`` of its other content words (stop words dropped, stemmed, Han text
  segmented as retrieval does it) occur in those sources. A paraphrase keeps most of its words;
  an answer from the model's own knowledge keeps few.

The exact terms are where an invented answer shows (a number, a setting, a command, a product),
so none may be missing; the word share tolerates the glue a model adds ("at once", "you can").
Thresholds are measured with bench/generation_checks.py (see docs/answers.md). Text that says
nothing checkable at all (only markers, symbols or stop words) is not supported: it is noise.

Pure functions over strings, CPU-light (a few regexes per sentence); no model.
"""

from __future__ import annotations

import html
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable, Sequence

from ragmesh_common.lexical import LexicalEncoder

#: Share of a sentence's content words that must occur in its cited sources.
#: Measured: bench/generation_checks.py (extractive runtime 1.0 on every answer; see docs/answers.md).
MIN_WORD_SUPPORT = 0.5
#: The same share for post-hoc attribution, where no model claimed the source: stricter.
MIN_ATTRIBUTION_SUPPORT = 0.75

_CITATION = re.compile(r"\[\s*S\d+(?:\s*[,;]\s*S\d+)*\s*\]")
_URL = re.compile(r"https?://[^\s<>\"'`()\[\]{}]+", re.IGNORECASE)  # checked on their own (foreign_url)
_CODE = re.compile(r"`([^`\n]+)`")
_GROUPED_NUMBER = re.compile(r"(?<![\w.,])\d{1,3}(?:,\d{3})+(?![\w,]*\d)")
_NUMBER = re.compile(r"\d+(?:\.\d+)*")
_LIST_MARKER = re.compile(r"^\s*(?:[-*•]\s+|\d{1,3}[.)]\s+)", re.MULTILINE)
# A run of word characters joined by the characters identifiers, paths and versions use.
_TERM = re.compile(r"[^\W_]+(?:(?:_+|[./:\\-])[^\W_]+)*_*")
_IDENTIFIER_JOINERS = re.compile(r"[_./:\\]")
_OPENS_A_SENTENCE = set('.!?:;。！？"“([*#>|')
_ABBREVIATIONS = frozenset(
    {"e.g", "i.e", "etc", "vs", "cf", "approx", "incl", "fig", "no", "dr", "mr", "mrs", "ms", "st", "esp"}
)
_WORD_BEFORE_DOT = re.compile(r"([A-Za-z](?:[A-Za-z.]*[A-Za-z])?)\Z")
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+|\n+")
_SPLIT_SENTENCES = re.compile(r"((?<=[.!?。！？])\s+|\n+)")

_UNITS = {"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
          "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
          "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19}
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80,
         "ninety": 90}


@dataclass(frozen=True)
class Support:
    """How well some source text backs one sentence."""

    missing_terms: tuple[str, ...]  # exact terms found in none of the texts
    words: int  # content words of the sentence
    words_found: int
    claims: int  # words, numbers, code spans and terms: 0 for noise ("**", "\ufffd")

    @property
    def word_share(self) -> float:
        return self.words_found / self.words if self.words else 1.0

    def passes(self, min_share: float = MIN_WORD_SUPPORT) -> bool:
        return self.claims > 0 and not self.missing_terms and self.word_share >= min_share


@lru_cache(maxsize=1)
def _lexical() -> LexicalEncoder:
    return LexicalEncoder()


def _plain(text: str) -> str:
    """NFKC, entities decoded, ``1,000`` written ``1000``."""
    text = unicodedata.normalize("NFKC", html.unescape(text))
    return _GROUPED_NUMBER.sub(lambda m: m.group(0).replace(",", ""), text)


def _fold(text: str) -> str:
    return re.sub(r"\s+", " ", _plain(text)).casefold()


def canonical_number(text: str) -> str:
    """``08`` -> ``8``; decimals and versions stay as written (``1,000`` is made 1000 before)."""
    return text if "." in text else text.lstrip("0") or "0"


class SourceText:
    """One source's text, indexed once for every sentence checked against it."""

    def __init__(self, text: str) -> None:
        self.folded = _fold(text)
        self.words = set(content_words(self.folded))
        self.numbers = {canonical_number(n) for n in _NUMBER.findall(self.folded)}
        self.numbers.update(w for w in self.words if w.isdigit())  # spelled out: "forty-two" is 42


def content_words(text: str) -> list[str]:
    """Stemmed content words, stop words and single letters dropped; spelled numbers as digits
    (``forty-two`` -> ``42``), read from the tokens rather than by another pass over the text."""
    units, tens = _stemmed_numbers()
    words: list[str] = []
    for token in _lexical().tokens(text):
        if token in units and words and words[-1] in _TENS_DIGITS and units[token] < 10:
            words[-1] = str(int(words[-1]) + units[token])
        elif token in units:
            words.append(str(units[token]))
        elif token in tens:
            words.append(str(tens[token]))
        elif len(token) > 1 or not token.isalpha():
            words.append(token)
    return words


_TENS_DIGITS = frozenset(str(v) for v in _TENS.values())


@lru_cache(maxsize=1)
def _stemmed_numbers() -> tuple[dict[str, int], dict[str, int]]:
    """Number words as the lexical tokenizer stems them ("twenty" -> "twenti")."""
    def stems(table: dict[str, int]) -> dict[str, int]:
        return {token: value for word, value in table.items() for token in _lexical().tokens(word)}
    return stems(_UNITS), stems(_TENS)


@dataclass(frozen=True)
class _Claims:
    numbers: tuple[str, ...]
    codes: tuple[str, ...]
    terms: tuple[str, ...]
    words: tuple[str, ...]


def _claims(sentence: str) -> _Claims:
    text = _LIST_MARKER.sub(" ", _URL.sub(" ", _CITATION.sub(" ", _plain(sentence))))
    codes = tuple(_fold(c).strip() for c in _CODE.findall(text) if c.strip())
    prose = _CODE.sub(" ", text)
    terms: list[str] = []
    numbers: list[str] = []
    for match in _TERM.finditer(prose):
        term = match.group(0).strip("./:-")
        if not term:
            continue
        if _is_exact_term(term, prose[: match.start()]):
            terms.append(term.casefold())
        else:
            numbers += [canonical_number(n) for n in _NUMBER.findall(term)]
    return _Claims(tuple(dict.fromkeys(numbers)), codes, tuple(dict.fromkeys(terms)),
                   tuple(content_words(_CODE.sub(" ", prose))))


def _is_exact_term(term: str, before: str) -> bool:
    """An identifier, path, acronym or a capitalised name inside a sentence."""
    if _IDENTIFIER_JOINERS.search(term):
        # max_parallel, tern.toml, etc/tern; not e.g / i.e (every part a single character)
        return any(ch.isalpha() for ch in term) and any(len(p) > 1 for p in _IDENTIFIER_JOINERS.split(term))
    letters = [ch for ch in term if ch.isalpha()]
    if len(letters) < 2 or not letters[0].isupper() or not term[0].isalpha():
        return False
    if sum(ch.isupper() for ch in letters) >= 2:  # LDAP, PostgreSQL, TLSv1
        return True
    before = before.rstrip()
    return bool(before) and before[-1] not in _OPENS_A_SENTENCE


def support(sentence: str, sources: Sequence[SourceText]) -> Support:
    """How well the union of ``sources`` backs ``sentence``."""
    claims = _claims(sentence)
    missing = [n for n in claims.numbers if not any(n in s.numbers for s in sources)]
    missing += [f"`{c}`" for c in claims.codes if not any(c in s.folded for s in sources)]
    missing += [t for t in claims.terms if not any(_term_in(t, s) for s in sources)]
    found = sum(any(w in s.words for s in sources) for w in claims.words)
    size = len(claims.words) + len(claims.numbers) + len(claims.codes) + len(claims.terms)
    return Support(tuple(missing), len(claims.words), found, size)


def _term_in(term: str, source: SourceText) -> bool:
    """The term as a whole word of the source; a name also as its plural or possessive
    (``Broncos`` / ``Bronco``), once stemmed."""
    if re.search(r"(?<!\w)" + re.escape(term) + r"(?!\w)", source.folded):
        return True
    if _IDENTIFIER_JOINERS.search(term):
        return False
    stems = content_words(term)
    return bool(stems) and all(s in source.words for s in stems)


def sentences(text: str) -> list[str]:
    """The sentences of a piece of answer text (split at sentence ends and line ends). A dot
    after an initial or an abbreviation ends no sentence ("The T. T. Tsui Gallery", "Y. pestis",
    "e.g. this"), as in the segmenter: cut there, "T." alone has nothing to check and fails."""
    parts, start = [], 0
    for end in _SENTENCE_END.finditer(text):
        if "\n" not in end.group() and text[end.start() - 1] == "." and is_abbreviation(text, end.start() - 1):
            continue
        parts.append(text[start:end.start()])
        start = end.end()
    parts.append(text[start:])
    return [part for part in parts if _CITATION.sub("", part).strip(" .,;:!?")]


def is_abbreviation(text: str, dot: int) -> bool:
    """Whether the dot at ``text[dot]`` closes an initial ("T.") or an abbreviation ("e.g.")."""
    word = _WORD_BEFORE_DOT.search(text, max(0, dot - 24), dot)
    return bool(word) and (word.group(1).lower() in _ABBREVIATIONS or len(word.group(1)) == 1)


def attribute(text: str, sources: dict[str, SourceText]) -> str | None:
    """``text`` (uncited) with each sentence cited from the one source that holds it, or None
    when some sentence is held by no source (then the model's answer stands as it is: uncited).

    Stricter than the check of a cited sentence (``MIN_ATTRIBUTION_SUPPORT``): here no model
    claimed the source, the words alone choose it. A sentence with no content word ("Sure!") is
    held by nothing."""
    pieces = _SPLIT_SENTENCES.split(text)
    out: list[str] = []
    for i, piece in enumerate(pieces):
        if i % 2 or not piece.strip():
            out.append(piece)
            continue
        best: tuple[float, int, str] | None = None
        for rank, (source_id, source) in enumerate(sources.items()):
            found = support(piece, [source])
            if found.words and found.passes(MIN_ATTRIBUTION_SUPPORT):
                best = max(best or (-1.0, 0, ""), (found.word_share, -rank, source_id))
        if best is None:
            return None
        stripped = piece.rstrip()
        out.append(f"{stripped} [{best[2]}]{piece[len(stripped):]}")
    return "".join(out)
