"""Health answers."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import Meta


class LiveResponse(msgspec.Struct, kw_only=True):
    status: Literal["ok"] = "ok"


class ReadyResponse(msgspec.Struct, kw_only=True):
    status: Annotated[
        Literal["ready", "degraded", "not_ready"],
        Meta(description="degraded: served, but answers carry the `degraded` components' flags"),
    ]
    checks: Annotated[
        dict[str, str], Meta(description="retrieval, rerank, generation, corpora -> serving | not_serving")
    ]
    models: Annotated[
        dict[str, str],
        Meta(description="model runtime behind each service: embedding (retrieval), rerank, generation "
                         "-> serving | not_serving | unknown"),
    ]
    degraded: Annotated[
        list[str],
        Meta(description="components answers are degraded for: embedding (keyword-only search), "
                         "embedding_model (some corpora keyword-only: see keyword_only), rerank (fused order), "
                         "generation (retrieval summary instead of an answer)"),
    ]
    active_corpora: int
    keyword_only: Annotated[
        dict[str, str],
        Meta(description="corpus -> why it is searched by keywords only: the embedder that built its index "
                         "is neither the one serving now nor declared compatible with it"),
    ] = {}
    reason: str | None = None
