"""What every command writes: contract JSON on stdout, diagnostics on stderr, and the exit codes.

Exit codes: 0 ok, 1 other failure, 2 bad arguments, 3 auth failure, 4 no evidence, 5 unavailable.
"""

from __future__ import annotations

import json
import sys
from typing import Any

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_AUTH, EXIT_NO_EVIDENCE, EXIT_UNAVAILABLE = 0, 1, 2, 3, 4, 5


def err(message: str) -> None:
    print(f"ragmesh: {message}", file=sys.stderr, flush=True)


def emit(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
    sys.stdout.flush()
