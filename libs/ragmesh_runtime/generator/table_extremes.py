"""The row of a table that holds the largest or smallest value of a column.

"Which light mode has the longest runtime?" is answered by one row — the one whose Runtime is
largest — not by every row that mentions runtime. A column is the one whose header shares a term
with the question and whose cells read as quantities in at least two rows; quantities of time and
size are compared in one unit ("90 min" < "2 h"), others as plain numbers.
"""

from __future__ import annotations

import re
from typing import Sequence

from ragmesh_runtime.generator.lexical import content_terms
from ragmesh_runtime.generator.units import AnswerUnit

_QUANTITY = re.compile(r"(-?\d[\d,]*(?:\.\d+)?)\s*([A-Za-zµ]*)")
_SCALE = {
    "ms": 0.001, "s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1, "min": 60, "mins": 60, "minute": 60,
    "minutes": 60, "h": 3600, "hr": 3600, "hrs": 3600, "hour": 3600, "hours": 3600, "d": 86400, "day": 86400,
    "days": 86400, "w": 604800, "week": 604800, "weeks": 604800,
    "b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12, "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4,
}


def quantity(cell: str) -> float | None:
    match = _QUANTITY.search(cell)
    if match is None:
        return None
    try:
        value = float(match.group(1).replace(",", ""))
    except ValueError:
        return None
    return value * _SCALE.get(match.group(2).lower(), 1)


def extreme_row(question: str, rows: Sequence[AnswerUnit], direction: str) -> AnswerUnit | None:
    """The row with the largest (``max``) or smallest (``min``) value in the column the question
    names; None when no column is named or fewer than two rows hold a quantity in it."""
    asked = content_terms(question)
    if not rows or not rows[0].cells:
        return None
    for column, (header, _) in enumerate(rows[0].cells):
        if column == 0 or not header or not content_terms(header) & asked:
            continue
        valued = [(quantity(row.cells[column][1]), row) for row in rows if len(row.cells) > column]
        valued = [(value, row) for value, row in valued if value is not None]
        if len(valued) < 2:
            continue
        pick = max if direction == "max" else min
        return pick(valued, key=lambda pair: pair[0])[1]
    return None
