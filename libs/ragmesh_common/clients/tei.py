"""Async client for the Text Embeddings Inference HTTP API (/embed, /rerank, /info, /health).

The same client talks to TEI containers in production and to the CPU runtime in the embedded
default. Written against the documented API with httpx instead of the `tei-client` package, whose
first async call makes a blocking GET /info and whose async health check is broken.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from ragmesh_common.clients import KEEPALIVE_EXPIRY_S
from ragmesh_common.embedders.identity import EmbedderIdentity, from_tei_info
from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.telemetry import with_request_context

# A ragmesh header TEI ignores: the CPU runtime serves a request marked "bulk" after the interactive
# ones queued with it (ragmesh_runtime.batching), so an index build's batches do not hold up searches.
PRIORITY_HEADER = "X-Ragmesh-Priority"


@dataclass(frozen=True)
class RerankHit:
    index: int
    score: float


class TeiClient:
    def __init__(self, base_url: str, *, timeout: float = 30.0, client: httpx.AsyncClient | None = None,
                 bulk: bool = False) -> None:
        """``bulk``: mark /embed and /rerank requests as bulk work (an index build's), not a search's."""
        self.base_url = base_url.rstrip("/")
        self._client = client or httpx.AsyncClient(
            base_url=self.base_url, timeout=timeout,
            limits=httpx.Limits(max_keepalive_connections=16, keepalive_expiry=KEEPALIVE_EXPIRY_S),
        )
        with_request_context(self._client)
        self._headers = {PRIORITY_HEADER: "bulk"} if bulk else {}
        self._info: dict[str, Any] | None = None

    async def close(self) -> None:
        await self._client.aclose()

    async def embed(self, texts: list[str], *, timeout: float | None = None) -> list[list[float]]:
        if not texts:
            return []
        data = await self._post("/embed", {"inputs": texts, "normalize": True, "truncate": True}, timeout)
        if not isinstance(data, list) or len(data) != len(texts):
            raise RagmeshError(ErrorCode.RUNTIME_ERROR, "embedding runtime returned a malformed response")
        return data

    async def rerank(self, query: str, texts: list[str], *, timeout: float | None = None) -> list[RerankHit]:
        if not texts:
            return []
        # Raw scores: a cross-encoder's logits, the CPU runtime's z-score sum. The rerank service
        # standardises them to fuse retrieval's signals, which a logistic squash would bend.
        data = await self._post(
            "/rerank", {"query": query, "texts": texts, "raw_scores": True, "truncate": True}, timeout
        )
        try:
            hits = [RerankHit(int(item["index"]), float(item["score"])) for item in data]
        except (TypeError, KeyError, ValueError):
            raise RagmeshError(ErrorCode.RUNTIME_ERROR, "rerank runtime returned a malformed response") from None
        return sorted(hits, key=lambda h: h.score, reverse=True)

    async def info(self, *, refresh: bool = False) -> dict[str, Any]:
        if self._info is None or refresh:
            self._info = await self._get("/info")
        return self._info

    async def health(self, *, timeout: float = 2.0) -> bool:
        try:
            resp = await self._client.get("/health", timeout=timeout)
        except httpx.HTTPError:
            return False
        return resp.status_code == 200

    async def model_id(self) -> str:
        return str((await self.info()).get("model_id", "unknown"))

    async def identity(self) -> EmbedderIdentity:
        """The embedder behind /embed in TEI's terms (embedders.identity); ``embed`` always asks for
        unit vectors, so their normalization is l2."""
        return from_tei_info(await self.info(), normalization="l2")

    async def _get(self, path: str) -> Any:
        try:
            resp = await self._client.get(path)
        except httpx.HTTPError as exc:
            raise RagmeshError(ErrorCode.UNAVAILABLE, f"model runtime unreachable ({type(exc).__name__})") from None
        return self._decode(resp)

    async def _post(self, path: str, body: dict[str, Any], timeout: float | None) -> Any:
        try:
            resp = await self._client.post(path, json=body, headers=self._headers,
                                           timeout=timeout or self._client.timeout)
        except httpx.TimeoutException:
            raise RagmeshError(ErrorCode.DEADLINE_EXCEEDED, "model runtime timed out") from None
        except httpx.HTTPError as exc:
            raise RagmeshError(ErrorCode.UNAVAILABLE, f"model runtime unreachable ({type(exc).__name__})") from None
        return self._decode(resp)

    @staticmethod
    def _decode(resp: httpx.Response) -> Any:
        if resp.status_code in (400, 413, 422):  # TEI's Empty, body size, Validation and Tokenizer
            raise RagmeshError(ErrorCode.INVALID_ARGUMENT, f"model runtime rejected the input ({resp.status_code})")
        if resp.status_code >= 400:
            raise RagmeshError(ErrorCode.RUNTIME_ERROR, f"model runtime answered {resp.status_code}")
        try:
            return resp.json()
        except ValueError:
            raise RagmeshError(ErrorCode.RUNTIME_ERROR, "model runtime returned invalid JSON") from None
