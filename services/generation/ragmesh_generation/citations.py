"""Checks that a piece of answer text is grounded in the sources it cites.

A segment passes when:
- it cites at least one source as ``[S#]`` (also ``[S1, S2]``), and every cited id was given;
- every quoted span ("...", “...”, 「...」, 『...』) occurs in the text of a source cited in the
  same segment. Matching ignores case, Unicode width forms (NFKC) and whitespace runs (spaces
  between CJK characters vanish); an ellipsis inside a quote splits it into parts that must each
  occur. Single quotes are not treated as quotation marks (apostrophes make them ambiguous);
- every absolute http(s) URL occurs among the sources: a source's own URL or a URL inside its
  text, compared without fragment, trailing slash or case of scheme and host;
- every sentence is supported by the sources the segment cites: its numbers, code spans, names
  and identifiers occur in them and most of its other words do (``support``). Markers on a
  sentence the sources never say (``set LDAP_URL in the config file [S1][S3]``) do not pass.

Pure functions over strings; problem reports carry kinds and source ids, never document text.
"""

from __future__ import annotations

import html
import re
import unicodedata
from dataclasses import dataclass
from typing import Iterable, Sequence
from urllib.parse import urlsplit, urlunsplit

from ragmesh_generation.domain import EvidenceSource
from ragmesh_generation.support import SourceText, sentences, support

CITATION = re.compile(r"\[\s*(S\d+(?:\s*[,;]\s*S\d+)*)\s*\]")
_ID = re.compile(r"S\d+")
_QUOTE_PAIRS = (('"', '"'), ("“", "”"), ("「", "」"), ("『", "』"))
_QUOTES = [re.compile(re.escape(o) + r"([^" + re.escape(c) + r"\n]*(?:\n(?!\n)[^" + re.escape(c) + r"\n]*)*)"
                      + re.escape(c)) for o, c in _QUOTE_PAIRS]
_URL = re.compile(r"https?://[^\s<>\"'`()\[\]{}]+", re.IGNORECASE)
_URL_TRAILING = ".,;:!?*_~"
_CJK = r"\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef"
_SPACE_BETWEEN_CJK = re.compile(rf"(?<=[{_CJK}]) (?=[{_CJK}])")
_ELLIPSIS = re.compile(r"\.{3,}|…")
_EDGE_PUNCTUATION = " \t\n.,;:!?。，、；：！？-–—*_`()[]"

PROBLEM_TEXT = {
    "no_citation": "a statement without a citation",
    "unknown_source": "a citation of a source id that was not given",
    "unsupported_quote": "a quote not found in the source it cites",
    "foreign_url": "a URL that is not in the evidence",
    "unsupported_statement": "a statement its cited sources do not support",
    "empty": "an empty answer",
}


@dataclass(frozen=True)
class Problem:
    kind: str  # a key of PROBLEM_TEXT
    source_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class SegmentCheck:
    cited: tuple[str, ...]  # ids in order of first citation, known or not
    problems: tuple[Problem, ...]

    @property
    def ok(self) -> bool:
        return not self.problems


def cited_ids(text: str) -> list[str]:
    seen: dict[str, None] = {}
    for match in CITATION.finditer(text):
        for source_id in _ID.findall(match.group(1)):
            seen.setdefault(source_id, None)
    return list(seen)


def quoted_spans(text: str) -> list[str]:
    """Quoted spans in order of appearance. A quote may wrap lines but not cross a blank line."""
    found: list[tuple[int, str]] = []
    for pattern in _QUOTES:
        found += [(m.start(), m.group(1)) for m in pattern.finditer(text)]
    return [span for _, span in sorted(found)]


def urls_in(text: str) -> list[str]:
    return [m.group(0).rstrip(_URL_TRAILING) for m in _URL.finditer(html.unescape(text))]


def normalize_for_match(text: str) -> str:
    text = unicodedata.normalize("NFKC", html.unescape(text))
    text = re.sub(r"\s+", " ", text)
    return _SPACE_BETWEEN_CJK.sub("", text).casefold()


def normalize_url(url: str) -> str:
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    path = parts.path.rstrip("/")
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), path, parts.query, ""))


def _quote_parts(quote: str) -> list[str]:
    """The parts of a quote that must occur verbatim (citation markers dropped, ellipses split)."""
    quote = CITATION.sub(" ", unicodedata.normalize("NFKC", html.unescape(quote)))
    parts = (normalize_for_match(part).strip(_EDGE_PUNCTUATION) for part in _ELLIPSIS.split(quote))
    # A part with no letter or digit ("", ": ", "-") proves nothing either way.
    return [part for part in parts if any(ch.isalnum() for ch in part)]


class CitationChecker:
    """Verifies answer segments against the sources of one request."""

    def __init__(self, sources: Sequence[EvidenceSource]) -> None:
        self._texts = {s.source_id: normalize_for_match(s.text) for s in sources}
        self._raw = {s.source_id: s.text for s in sources}
        self._indexed: dict[str, SourceText] = {}
        self._urls = {normalize_url(u) for u in _source_urls(sources)}

    def source_text(self, source_id: str) -> SourceText:
        """A source indexed for support checks, built when first cited (most are never cited)."""
        if source_id not in self._indexed:
            self._indexed[source_id] = SourceText(self._raw[source_id])
        return self._indexed[source_id]

    @property
    def indexed(self) -> dict[str, SourceText]:
        """Every source, indexed (for attribution, which may pick any of them), in the order given."""
        return {source_id: self.source_text(source_id) for source_id in self._raw}

    def check(self, segment: str) -> SegmentCheck:
        cited = tuple(cited_ids(segment))
        problems: list[Problem] = []
        if not cited:
            problems.append(Problem("no_citation"))
        unknown = tuple(s for s in cited if s not in self._texts)
        if unknown:
            problems.append(Problem("unknown_source", unknown))
        known = [s for s in cited if s in self._texts]
        for quote in quoted_spans(segment):
            parts = _quote_parts(quote)
            if parts and not any(all(part in self._texts[s] for part in parts) for s in known):
                problems.append(Problem("unsupported_quote", tuple(known)))
        for url in urls_in(segment):
            if normalize_url(url) not in self._urls:
                problems.append(Problem("foreign_url"))
        if known and not problems:  # a wrong quote or URL is the more precise reason
            backing = [self.source_text(s) for s in known]
            said = sentences(segment)  # none: the segment is only markers
            if not said or not all(support(sentence, backing).passes() for sentence in said):
                problems.append(Problem("unsupported_statement", tuple(known)))
        return SegmentCheck(cited, tuple(problems))


def _source_urls(sources: Iterable[EvidenceSource]) -> Iterable[str]:
    for source in sources:
        if source.url:
            yield source.url
        yield from urls_in(source.text)
