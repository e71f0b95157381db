"""Health answers."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import Meta


class LiveResponse(msgspec.Struct, kw_only=True):
    status: Literal["ok"] = "ok"


class ReadyResponse(msgspec.Struct, kw_only=True):
    status: Literal["ready", "not_ready"]
    checks: Annotated[
        dict[str, str], Meta(description="retrieval, rerank, generation, corpora -> serving | not_serving")
    ]
    active_corpora: int
    reason: str | None = None
