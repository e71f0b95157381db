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


def max_texts_from_info(info: dict[str, Any]) -> int | None:
    """Most texts one /rerank request may carry: the CPU runtime's own rerank cap, else TEI's
    ``max_client_batch_size`` (TEI applies it to /rerank too)."""
    if not isinstance(info, dict):
        return None
    described = info.get("ragmesh")
    candidates = [described.get("rerank_max_texts") if isinstance(described, dict) else None,
                  info.get("max_client_batch_size")]
    for value in candidates:
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


class TeiReranker(Reranker):
    """Splits a long candidate list into requests the runtime accepts (its advertised cap, else
    ``batch_size``) and sends them concurrently. Scores of one request are only guaranteed to
    order that request's texts (the CPU runtime's blend normalises per request), so the cap of the
    CPU runtime is set to hold a whole candidate list; a cross-encoder's scores merge as they are."""

    def __init__(self, client: TeiClient, *, batch_size: int = 32) -> None:
        self._client = client
        self._batch_size = max(1, batch_size)

    async def rerank(self, query: str, texts: list[str], *, timeout: float) -> list[RankedText]:
        size = await self._request_cap()
        try:
            async with asyncio.timeout(timeout):
                starts = range(0, len(texts), size)
                replies = await asyncio.gather(*(
                    self._client.rerank(query, texts[start:start + size], timeout=timeout) for start in starts))
        except TimeoutError:
            raise RagmeshError(ErrorCode.DEADLINE_EXCEEDED, "rerank runtime timed out") from None
        ranked = []
        for start, hits in zip(starts, replies):
            batch_len = len(texts[start:start + size])
            if any(not 0 <= hit.index < batch_len for hit in hits):
                raise RagmeshError(ErrorCode.RUNTIME_ERROR, "rerank runtime returned an index out of range")
            ranked.extend(RankedText(start + hit.index, hit.score) for hit in hits)
        return ranked

    async def _request_cap(self) -> int:
        """The runtime's cap from its (cached) /info; the configured size when it cannot say, so a
        failing /info leaves the /rerank call's own error to speak."""
        try:
            async with asyncio.timeout(1.0):
                return max_texts_from_info(await self._client.info()) or self._batch_size
        except (RagmeshError, TimeoutError):
            return self._batch_size

    async def identity(self, *, timeout: float) -> RerankerIdentity:
        try:
            async with asyncio.timeout(timeout):
                info = await self._client.info()
        except TimeoutError:
            raise RagmeshError(ErrorCode.DEADLINE_EXCEEDED, "rerank runtime timed out") from None
        if not isinstance(info, dict):
            raise RagmeshError(ErrorCode.RUNTIME_ERROR, "rerank runtime returned a malformed /info")
        return RerankerIdentity(str(info.get("model_id") or "unknown"), score_kind_from_info(info),
                                max_texts_from_info(info))

    async def close(self) -> None:
        await self._client.close()
