"""The CLI's last request to a mesh of a state folder, kept beside that mesh's span file.

The gateway writes a request's spans a moment after the request ends (each process exports its
spans in batches, ragmesh_common.span_file). `ragmesh answer` then `ragmesh trace --last`, as the
README runs them, can be quicker than that moment on a busy machine, and `--last` would show the
request before. So a query command that found its gateway through the state folder's mesh record
notes the request id it sent, and when it sent it, once the gateway answered; `trace --last` waits
for that request's spans when no request recorded in the file is newer.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from ragmesh_common.span_file import default_span_file

NAME = "last-request.json"


@dataclass(frozen=True)
class SentRequest:
    request_id: str
    sent_ns: int  # wall clock, as span start times are


def path_beside(span_file: Path) -> Path:
    return Path(span_file).with_name(NAME)


def remember(state: Path, request_id: str, sent_ns: int) -> None:
    """Note ``request_id`` as sent at ``sent_ns`` (``time.time_ns()``) to the mesh of ``state``.
    Best effort: a folder that cannot be written only loses the wait it buys."""
    path = path_beside(default_span_file(state))
    if not path.parent.is_dir():
        return
    staged = path.with_name(f".{NAME}.{os.getpid()}")
    try:
        staged.write_text(json.dumps({"request_id": request_id, "sent_ns": sent_ns}), encoding="utf-8")
        os.replace(staged, path)
    except OSError:
        with contextlib.suppress(OSError):
            staged.unlink(missing_ok=True)  # a write cut short (a full disk) leaves nothing behind


def recall(span_file: Path) -> SentRequest | None:
    """The request noted beside ``span_file``, or None (none noted, or unreadable)."""
    try:
        data = json.loads(path_beside(span_file).read_text(encoding="utf-8"))
        return SentRequest(str(data["request_id"]), int(data["sent_ns"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
