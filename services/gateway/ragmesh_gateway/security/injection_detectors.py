"""Detectors: each turns a TextView into hits (rule, severity, original span, how to defang it).

Detectors only find; :mod:`ragmesh_gateway.security.neutralize` decides how the text changes.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from collections.abc import Iterator

from ragmesh_gateway.security import injection_patterns as p
from ragmesh_gateway.security.findings import Severity
from ragmesh_gateway.security.text_view import (
    TextView,
    invisible_severity,
    joiner_is_legitimate,
    visible_escape,
)

HIGH, MEDIUM, LOW = Severity.HIGH, Severity.MEDIUM, Severity.LOW


@dataclass(frozen=True, slots=True)
class Hit:
    rule_id: str
    severity: Severity
    start: int  # original offsets, end exclusive
    end: int
    breaks: tuple[int, ...] = ()  # original offsets before which a visible break is inserted
    wrap: bool = True  # surround the span with untrusted markers


def _hit(view: TextView, rule_id: str, severity: Severity, start: int, end: int,
         breaks: tuple[int, ...] = (), wrap: bool = True) -> Hit:
    o_start, o_end = view.to_original(start, end)
    return Hit(rule_id, severity, o_start, o_end, tuple(view.original_offset(b) for b in breaks), wrap)


def invisible_characters(original: str) -> tuple[list[Hit], dict[int, str]]:
    """Runs of invisible/bidi characters, and the visible escape that replaces each character."""
    hits: list[Hit] = []
    escapes: dict[int, str] = {}
    if original.isascii():
        return hits, escapes
    run_start: int | None = None
    run_severities: list[Severity] = []
    for index, ch in enumerate(original):
        severity = invisible_severity(ch)
        suspicious = (
            severity is not None
            and not (index == 0 and ch == "\ufeff")  # a byte-order mark opening a file is harmless
            and not joiner_is_legitimate(original, index)
        )
        if suspicious:
            escapes[index] = visible_escape(ch)
            if run_start is None:
                run_start, run_severities = index, []
            run_severities.append(severity)  # type: ignore[arg-type]
        elif run_start is not None:
            hits.append(_run_hit(run_start, index, run_severities))
            run_start = None
    if run_start is not None:
        hits.append(_run_hit(run_start, len(original), run_severities))
    return hits, escapes


def _run_hit(start: int, end: int, severities: list[Severity]) -> Hit:
    severity = max(severities, key=lambda s: s.rank)
    return Hit("invisible_char", severity, start, end, wrap=False)


def role_tags(view: TextView) -> Iterator[Hit]:
    for m in p.ROLE_TAG.finditer(view.text):
        if m.group().lower() == "</s>" and _strikethrough_opened(view.text, m.start()):
            continue
        yield _hit(view, "role_tag", HIGH, m.start(), m.end(), breaks=(m.start() + 1,))


def _strikethrough_opened(text: str, pos: int) -> bool:
    line_start = text.rfind("\n", 0, pos) + 1
    segment = text[line_start:pos]
    return "<s>" in segment or "<S>" in segment


def role_lines(view: TextView) -> Iterator[Hit]:
    for m in p.ROLE_LINE.finditer(view.text):
        group = "role" if m.group("role") else "alpaca"
        severity = HIGH if m.group(group) in p.HIGH_SEVERITY_ROLES else MEDIUM
        yield _hit(view, "role_line", severity, m.start(group), m.end())


def tool_calls(view: TextView) -> Iterator[Hit]:
    for m in p.TOOL_CALL_JSON.finditer(view.text):
        yield _hit(view, "tool_call", HIGH, m.start(), m.end())
    for m in p.TOOL_CALL_TAG.finditer(view.text):
        yield _hit(view, "tool_call", HIGH, m.start(), m.end(), breaks=(m.start() + 1,))


def react_scaffolds(view: TextView) -> Iterator[Hit]:
    labels = list(p.REACT_LABEL.finditer(view.text))
    if len({m.group("label") for m in labels}) < 2:
        return
    for m in labels:
        yield _hit(view, "react_scaffold", MEDIUM, m.start("label"), m.end())


def _override_matches(text: str) -> Iterator[re.Match[str]]:
    lowered = text.lower()
    if len(lowered) == len(text):
        yield from p.OVERRIDE_EN.finditer(lowered)
    else:
        yield from p.OVERRIDE_EN_ANY_CASE.finditer(text)
    if p.CJK.search(text):
        yield from p.OVERRIDE_ZH.finditer(text)


def instruction_overrides(view: TextView) -> Iterator[Hit]:
    for m in _override_matches(view.text):
        yield _hit(view, "instruction_override", HIGH, m.start(), m.end())


def talks_to_model(text: str) -> bool:
    if next(_override_matches(text), None) is not None:
        return True
    return any(
        pattern.search(text)
        for pattern in (p.ROLE_TAG, p.ROLE_LINE, p.TOOL_CALL_JSON, p.TOOL_CALL_TAG, p.ADDRESSES_MODEL)
    )


def hidden_comments(view: TextView) -> Iterator[Hit]:
    """HTML and Markdown comments are not rendered; one addressing a model is an attack carrier."""
    text = view.text
    for start, end, body in _html_comments(text):
        if talks_to_model(body):
            yield _hit(view, "hidden_comment", HIGH, start, end, breaks=(start + 1,))
    for m in p.MARKDOWN_COMMENT.finditer(text):
        if talks_to_model(m.group("body")):
            yield _hit(view, "hidden_comment", HIGH, m.start(), m.end(), breaks=(m.start() + 1,))


def _html_comments(text: str) -> Iterator[tuple[int, int, str]]:
    # str.find instead of a lazy regex: an unclosed "<!--" repeated many times would make the
    # regex rescan the rest of the text from every opening (quadratic time).
    position = 0
    while (start := text.find("<!--", position)) != -1:
        close = text.find("-->", start + 4)
        if close == -1:
            return
        yield start, close + 3, text[start + 4:close]
        position = close + 3


def hidden_html(view: TextView) -> Iterator[Hit]:
    text = view.text
    if "<" not in text:
        return
    for m in p.HTML_OPEN_TAG.finditer(text):
        if not _hides_content(m.group("attrs")):
            continue
        close = _closing_tag(m.group("tag").lower()).search(text, m.end(), m.end() + 10_000)
        if close is not None:
            end = close.end()
        else:
            newline = text.find("\n", m.end())
            end = len(text) if newline == -1 else newline
        yield _hit(view, "hidden_html", HIGH, m.start(), end, breaks=(m.start() + 1,))


@functools.lru_cache(maxsize=64)
def _closing_tag(tag: str) -> re.Pattern[str]:
    return re.compile(rf"</{re.escape(tag)}\s*>", re.IGNORECASE)


def _hides_content(attrs: str) -> bool:
    if p.HIDDEN_ATTR.search(attrs):
        return True
    for style in p.STYLE_ATTR.finditer(attrs):
        css = style.group("css")
        if p.HIDING_STYLE.search(css):
            return True
        if p.WHITE_COLOR.search(css):
            background = p.BACKGROUND.search(css)
            # White text hides only where the page is white: unset backgrounds default to white.
            if background is None or p.WHITE_VALUE.match(background.group("value")):
                return True
    return False


_ABSOLUTE_URL = re.compile(r"^(?:https?:)?//[^/?#\s]*", re.IGNORECASE)


def exfiltration_links(view: TextView) -> Iterator[Hit]:
    text = view.text
    if "//" not in text:
        return
    for m in p.MARKDOWN_LINK.finditer(text):
        if _carries_placeholder(m.group("url")):
            paren = m.start() + m.group().find("](") + 1
            end = m.end() + (1 if text[m.end():m.end() + 1] in (")", ">") else 0)
            yield _hit(view, "exfil_link", HIGH, m.start(), end, breaks=(paren,))
    for m in p.HTML_URL_ATTR.finditer(text):
        if _carries_placeholder(m.group("url")):
            yield _hit(view, "exfil_link", HIGH, m.start(), m.end(), breaks=(m.start() + 1,))


def _carries_placeholder(url: str) -> bool:
    host = _ABSOLUTE_URL.match(url)
    if host is None:  # relative links cannot leave the site
        return False
    return p.URL_PLACEHOLDER.search(url, host.end()) is not None


def fake_markers(view: TextView) -> Iterator[Hit]:
    for m in p.FAKE_MARKER.finditer(view.text):
        yield _hit(view, "fake_marker", HIGH, m.start(), m.end(), breaks=(m.start() + 1,), wrap=False)


def overlong_lines(original: str, max_line_chars: int) -> Iterator[Hit]:
    if len(original) <= max_line_chars:
        return
    for m in re.finditer(rf"[^\n]{{{max_line_chars + 1},}}", original):
        yield Hit("overlong_line", LOW, m.start(), m.end())


# Every pattern detector that also runs on text decoded from a base64 blob.
PATTERN_DETECTORS = (role_tags, role_lines, tool_calls, react_scaffolds, instruction_overrides,
                     hidden_comments, hidden_html, exfiltration_links, fake_markers)
