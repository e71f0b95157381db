"""The Reranker port over the TEI ``/rerank`` API (TEI containers or the CPU runtime)."""

from __future__ import annotations

import asyncio
from typing import Any

from ragmesh_common.clients.tei import TeiClient
from ragmesh_common.errors import ErrorCode, RagmeshError

from ragmesh_rerank.ports import RankedText, Reranker, RerankerIdentity


def score_kind_from_info(info: dict[str, Any]) -> str:
    """What ``/rerank`` scores mean, as the runtime describes itself in ``/info``.

    The CPU runtime adds a ``ragmesh`` object saying what its /rerank really computes (it is not a
    cross-encoder); TEI serving a cross-encoder reports ``model_type.reranker``. Anything else is
    "unknown" rather than a guess, because callers must never read the score as a probability.
    """
    described = info.get("ragmesh")
    if isinstance(described, dict):
        for key in ("rerank_score_kind", "score_kind", "rerank_method"):
            if isinstance(described.get(key), str) and described[key]:
                return described[key]
        rerank = described.get("rerank")
        if isinstance(rerank, str) and rerank:
            return rerank
        if isinstance(rerank, dict):
            for key in ("score_kind", "kind", "method"):
                if isinstance(rerank.get(key), str) and rerank[key]:
                    return rerank[key]
    model_type = info.get("model_type")
    if isinstance(model_type, dict) and "reranker" in model_type:
        return "cross_encoder"
    if isinstance(model_type, str) and "rerank" in model_type.lower():
        return "cross_encoder"
    return "unknown"


class TeiReranker(Reranker):
    def __init__(self, client: TeiClient) -> None:
        self._client = client

    async def rerank(self, query: str, texts: list[str], *, timeout: float) -> list[RankedText]:
        try:
            async with asyncio.timeout(timeout):
                hits = await self._client.rerank(query, texts, timeout=timeout)
        except TimeoutError:
            raise RagmeshError(ErrorCode.DEADLINE_EXCEEDED, "rerank runtime timed out") from None
        ranked = [RankedText(hit.index, hit.score) for hit in hits]
        if any(not 0 <= r.index < len(texts) for r in ranked):
            raise RagmeshError(ErrorCode.RUNTIME_ERROR, "rerank runtime returned an index out of range")
        return ranked

    async def identity(self, *, timeout: float) -> RerankerIdentity:
        try:
            async with asyncio.timeout(timeout):
                info = await self._client.info()
        except TimeoutError:
            raise RagmeshError(ErrorCode.DEADLINE_EXCEEDED, "rerank runtime timed out") from None
        if not isinstance(info, dict):
            raise RagmeshError(ErrorCode.RUNTIME_ERROR, "rerank runtime returned a malformed /info")
        return RerankerIdentity(str(info.get("model_id") or "unknown"), score_kind_from_info(info))

    async def close(self) -> None:
        await self._client.close()
