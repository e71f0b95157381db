"""Text every store can hold and every log can show: no NUL, no other control characters, no lone
surrogates.

PostgreSQL ``text`` cannot hold NUL (asyncpg: ``CharacterNotInRepertoireError``), a lone surrogate
cannot be encoded as UTF-8 at all, and the other C0 controls and DEL (terminal escapes, bells)
have no business in a query, a reason or an id. Tab, line feed and carriage return are ordinary
text. Edges refuse such text with ``INVALID_CHARACTER`` before it reaches any store.
"""

from __future__ import annotations

import re
from typing import Any

from ragmesh_common.errors import ErrorCode, RagmeshError

# C0 controls except \t \n \r, DEL, and UTF-16 surrogates (only ever alone in a Python str).
UNSAFE_CHARACTER = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")
# The same rule as a JSON Schema pattern (documented on string fields of the HTTP contract).
SAFE_TEXT_PATTERN = "^[^\\x00-\\x08\\x0b\\x0c\\x0e-\\x1f\\x7f]*$"
# Safe text that is not blank: at least one character that is neither a control nor whitespace as
# str.strip() sees it (spelled out: a regex \\s differs between Python and ECMA-262).
_SAFE = "\\x00-\\x08\\x0b\\x0c\\x0e-\\x1f\\x7f"
_STRIPPED = "\\t\\n\\x0b\\x0c\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000"
NON_BLANK_TEXT_PATTERN = f"^[^{_SAFE}]*[^{_SAFE}{_STRIPPED}][^{_SAFE}]*$"


def invalid_character(path: str) -> RagmeshError:
    return RagmeshError(
        ErrorCode.INVALID_CHARACTER,
        "text holds a NUL, another control character or a lone surrogate (only tab, LF and CR are allowed)",
        {"path": path},
    )


def check_text(value: str, path: str) -> str:
    """``value`` when it is safe text; INVALID_CHARACTER naming ``path`` otherwise."""
    if UNSAFE_CHARACTER.search(value):
        raise invalid_character(path)
    return value


def check_strings(value: Any, path: str = "$") -> None:
    """Every string (keys included) in decoded JSON, with msgspec-style paths (``$.a.b[2]``)."""
    if isinstance(value, str):
        check_text(value, path)
    elif isinstance(value, dict):
        for key, item in value.items():
            check_text(str(key), path)
            check_strings(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            check_strings(item, f"{path}[{index}]")
