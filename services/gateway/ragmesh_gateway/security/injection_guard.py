"""InjectionGuard: treat retrieved text as untrusted data and defang what looks like instructions.

Pure domain code (standard library only). Findings are reported through an optional
``on_findings`` callback so that counting them in Prometheus stays in the composition root
(see :func:`ragmesh_gateway.security.metrics.count_injection_findings`).

Rules (rule_id: what it catches, severity):
  role_tag              chat-template tokens and role tags: <|im_start|>, [INST], </s>, <system>   high
  role_line             a line opening like a chat turn: "System:", "User:", "### Instruction:"  high/medium
  tool_call             {"tool": ...}, {"function_call": ...}, {"name":..,"arguments":..}, <tool_call>  high
  react_scaffold        two or more different ReAct labels (Thought:/Action:/Observation:)       medium
  instruction_override  "ignore all previous instructions", "disregard the above", "忽略之前的所有指令",
                        "你现在是", "reveal your system prompt", ...                              high
  invisible_char        zero-width, bidi controls (U+202E ...), tag characters, soft hyphen     high/medium
  hidden_html           elements hidden by display:none, visibility:hidden, font-size:0,
                        opacity:0, off-screen offsets, white-on-white text, the hidden attribute high
  hidden_comment        HTML / Markdown comments whose body addresses a model                    high
  exfil_link            absolute Markdown/HTML links and images whose URL holds a placeholder
                        ({...}, ${X}, <X>, [X], =USER_DATA) for the model to fill               high
  fake_marker           text forging this guard's own [[untrusted markers                        high
  overlong_line         a line longer than ``max_line_chars``                                   low
  base64_payload        a base64 blob whose decoded text (first ``base64_max_decode_bytes``,
                        one level deep) trips any rule above; severity of the worst inner rule

The exact text transformation is documented in :mod:`ragmesh_gateway.security.neutralize`.
"""

from __future__ import annotations

import base64
import binascii
import functools
from dataclasses import dataclass
from collections.abc import Callable, Iterable, Sequence

from ragmesh_gateway.security import injection_detectors as d
from ragmesh_gateway.security import injection_patterns as p
from ragmesh_gateway.security.findings import Finding, GuardResult, excerpt_hash
from ragmesh_gateway.security.neutralize import neutralize
from ragmesh_gateway.security.text_view import TextView

FindingsSink = Callable[[Sequence[Finding]], None]


@dataclass(frozen=True, slots=True)
class GuardConfig:
    # Retrieved chunks are a few thousand characters and whole scientific abstracts reach ~5000;
    # a longer single line is built to hide content off-screen.
    max_line_chars: int = 8000
    # Bounds the cost of the one-level base64 rescan on hostile input.
    base64_max_decode_bytes: int = 4096
    base64_max_blobs: int = 32
    base64_min_decoded_chars: int = 8


class InjectionGuard:
    """Scans are remembered by their exact text (``cache_entries`` of them, least recently used
    first out): a chunk served again is not scanned again, and its findings are reported again."""

    def __init__(self, config: GuardConfig | None = None, *, on_findings: FindingsSink | None = None,
                 cache_entries: int = 4096) -> None:
        self._config = config or GuardConfig()
        self._on_findings = on_findings
        self._scan_once = functools.lru_cache(maxsize=cache_entries)(self._scan) if cache_entries else self._scan

    def scan(self, text: str) -> GuardResult:
        result = self._scan_once(text)
        if result.findings and self._on_findings is not None:
            self._on_findings(result.findings)
        return result

    def _scan(self, text: str) -> GuardResult:
        invisible_hits, escapes = d.invisible_characters(text)
        view = TextView.of(text)
        hits = invisible_hits + self._pattern_hits(view)
        hits.extend(d.overlong_lines(text, self._config.max_line_chars))
        hits.extend(self._base64_hits(view))
        if not hits:
            return GuardResult(text=text, findings=[], changed=False)
        findings = _findings(text, hits)
        neutralized = neutralize(text, hits, escapes)
        return GuardResult(text=neutralized, findings=findings, changed=neutralized != text)

    def scan_all(self, texts: Iterable[str]) -> list[GuardResult]:
        return [self.scan(text) for text in texts]

    @staticmethod
    def _pattern_hits(view: TextView) -> list[d.Hit]:
        return [hit for detector in d.PATTERN_DETECTORS for hit in detector(view)]

    def _base64_hits(self, view: TextView) -> list[d.Hit]:
        hits: list[d.Hit] = []
        for index, m in enumerate(p.BASE64_BLOB.finditer(view.text)):
            if index >= self._config.base64_max_blobs:
                break
            decoded = self._decode_text(m.group())
            if decoded is None:
                continue
            inner_invisible, _ = d.invisible_characters(decoded)
            inner = inner_invisible + self._pattern_hits(TextView.of(decoded))
            if inner:
                severity = max((h.severity for h in inner), key=lambda s: s.rank)
                start, end = view.to_original(m.start(), m.end())
                hits.append(d.Hit("base64_payload", severity, start, end))
        return hits

    def _decode_text(self, blob: str) -> str | None:
        """Decode the head of a blob; None unless it is mostly printable text."""
        limit = self._config.base64_max_decode_bytes
        data = blob.rstrip("=")[: (limit // 3) * 4]
        if len(data) % 4 == 1:
            data = data[:-1]
        data += "=" * (-len(data) % 4)
        altchars = b"-_" if ("-" in data or "_" in data) else None
        try:
            raw = base64.b64decode(data, altchars=altchars, validate=True)
        except (binascii.Error, ValueError):
            return None
        text = raw.decode("utf-8", errors="replace")
        if len(text) < self._config.base64_min_decoded_chars:
            return None
        printable = sum(1 for ch in text if ch.isprintable() or ch in "\n\r\t")
        return text if printable >= 0.9 * len(text) else None


def _findings(text: str, hits: Iterable[d.Hit]) -> list[Finding]:
    unique = {(h.rule_id, h.start, h.end): h for h in hits}
    return [
        Finding(h.rule_id, h.severity, h.start, h.end, excerpt_hash(text[h.start:h.end]))
        for h in sorted(unique.values(), key=lambda h: (h.start, h.end, h.rule_id))
    ]
