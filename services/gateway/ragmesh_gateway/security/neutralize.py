"""Defang suspicious spans visibly without deleting a single visible character.

The transformation, exactly (it is part of the contract the generation prompt relies on):

1. Wrap: each flagged span becomes ``[[untrusted:RULES]]`` + span + ``[[/untrusted]]``, where RULES
   is the comma-separated, sorted rule ids of all findings covering it. Overlapping or touching
   spans merge into one wrapper.
2. Break: tokens a model or renderer could act on get a MIDDLE DOT (U+00B7, ``·``) inserted after
   their first character: ``<|im_start|>`` -> ``<·|im_start|>``, ``[INST]`` -> ``[·INST]``,
   ``<tool_call>`` -> ``<·tool_call>``, ``![x](https://…)`` -> ``![x]·(https://…)`` (no longer a
   Markdown link), ``<!-- … -->`` -> ``<·!-- … -->`` (now rendered), ``[[untrusted`` -> ``[·[untrusted``
   (a forged marker can no longer close or open ours).
3. Escape: invisible and bidi characters are replaced by their escape spelled out as text,
   U+202E -> the six characters ``\\u202e``; supplementary ones as ``\\U000e0041``.

Removing the inserted markers and dots and un-escaping gives back the original text, so no content
is lost; the guard is meant to run once at the trust boundary (re-scanning its own output flags
its markers as forgeries).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from ragmesh_gateway.security.injection_detectors import Hit

BREAK = "\u00b7"
CLOSE = "[[/untrusted]]"


def open_marker(rule_ids: Iterable[str]) -> str:
    return f"[[untrusted:{','.join(sorted(set(rule_ids)))}]]"


def _merged_wraps(hits: Iterable[Hit]) -> list[tuple[int, int, set[str]]]:
    spans = sorted((h.start, h.end, h.rule_id) for h in hits if h.wrap and h.end > h.start)
    merged: list[tuple[int, int, set[str]]] = []
    for start, end, rule_id in spans:
        if merged and start <= merged[-1][1]:
            last_start, last_end, rules = merged[-1]
            rules.add(rule_id)
            merged[-1] = (last_start, max(last_end, end), rules)
        else:
            merged.append((start, end, {rule_id}))
    return merged


def neutralize(original: str, hits: Iterable[Hit], escapes: dict[int, str]) -> str:
    hits = list(hits)
    if not hits and not escapes:
        return original
    before: dict[int, list[str]] = defaultdict(list)
    opens: dict[int, str] = {}
    for start, end, rules in _merged_wraps(hits):
        opens[start] = open_marker(rules)
        before[end].append(CLOSE)  # closes precede an open at the same offset
    for start, marker in opens.items():
        before[start].append(marker)
    for offset in sorted({b for h in hits for b in h.breaks if 0 < b < len(original)}):
        before[offset].append(BREAK)

    pieces: list[str] = []
    cursor = 0
    for offset in sorted(set(before) | set(escapes)):
        if offset > len(original):
            continue
        pieces.append(original[cursor:offset])
        pieces.extend(before.get(offset, ()))
        cursor = offset
        if offset in escapes:
            pieces.append(escapes[offset])
            cursor = offset + 1
    pieces.append(original[cursor:])
    return "".join(pieces)
