"""Async client for the Text Embeddings Inference HTTP API (/embed, /rerank, /info, /health).

The same client talks to TEI containers in production and to the CPU runtime in the embedded
default. Written against the documented API instead of the `tei-client` package, whose first async
call makes a blocking GET /info and whose async health check is broken.

Given a URL, it speaks HTTP through aiohttp: every search makes one or two of these calls (retrieval's
/embed of a new query, rerank's /rerank), and aiohttp's compiled parser and lighter pool cost much
less CPU per call than httpx (docs/performance.md, "The runtime client"). Given an
``httpx.AsyncClient`` (the indexer's pool of runtimes, and tests that serve the API in-process), it
uses that. Both carry the trace context and the request id, keep no connection idle for longer than
the runtime's server would (ragmesh_common.clients), and fail with the same error codes.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp
import httpx
import msgspec

from ragmesh_common.clients import KEEPALIVE_EXPIRY_S, PRIORITY_HEADER
from ragmesh_common.embedders.identity import EmbedderIdentity, from_tei_info
from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.telemetry import inject_request_context, with_request_context

_JSON = msgspec.json.Encoder()


@dataclass(frozen=True)
class RerankHit:
    index: int
    score: float


class TeiClient:
    def __init__(self, base_url: str, *, timeout: float = 30.0, client: httpx.AsyncClient | None = None,
                 bulk: bool = False) -> None:
        """``client``: an httpx client to send through instead of aiohttp (its own base URL, limits and
        transport apply). ``bulk``: mark /embed and /rerank requests as bulk work (an index build's),
        not a search's."""
        self.base_url = base_url.rstrip("/")
        self._http: _Transport = (_Httpx(with_request_context(client)) if client is not None
                                  else _Aiohttp(self.base_url, timeout))
        # What every POST carries (its body is JSON).
        self._headers = {"Content-Type": "application/json", **({PRIORITY_HEADER: "bulk"} if bulk else {})}
        self._info: dict[str, Any] | None = None

    async def close(self) -> None:
        await self._http.close()

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
            self._info = await self._request("GET", "/info", None, None)
        return self._info

    async def health(self, *, timeout: float = 2.0) -> bool:
        try:
            status, _ = await self._http.send("GET", "/health", None, {}, timeout)
        except RagmeshError:
            return False
        return status == 200

    async def model_id(self) -> str:
        return str((await self.info()).get("model_id", "unknown"))

    async def identity(self) -> EmbedderIdentity:
        """The embedder behind /embed in TEI's terms (embedders.identity); ``embed`` always asks for
        unit vectors, so their normalization is l2."""
        return from_tei_info(await self.info(), normalization="l2")

    async def _post(self, path: str, body: dict[str, Any], timeout: float | None) -> Any:
        return await self._request("POST", path, body, timeout)

    async def _request(self, method: str, path: str, body: dict[str, Any] | None, timeout: float | None) -> Any:
        content, headers = (None, {}) if body is None else (_JSON.encode(body), self._headers)
        status, content = await self._http.send(method, path, content, headers, timeout)
        if status in (400, 413, 422):  # TEI's Empty, body size, Validation and Tokenizer
            raise RagmeshError(ErrorCode.INVALID_ARGUMENT, f"model runtime rejected the input ({status})")
        if status >= 400:
            raise RagmeshError(ErrorCode.RUNTIME_ERROR, f"model runtime answered {status}")
        try:
            return msgspec.json.decode(content)
        except msgspec.DecodeError:
            raise RagmeshError(ErrorCode.RUNTIME_ERROR, "model runtime returned invalid JSON") from None


class _Transport(Protocol):
    async def send(self, method: str, path: str, content: bytes | None, headers: dict[str, str],
                   timeout: float | None) -> tuple[int, bytes]:
        """(status, body); a call that gets no answer raises RagmeshError: DEADLINE_EXCEEDED when
        it ran out of time, UNAVAILABLE otherwise. ``timeout`` None: the transport's own."""

    async def close(self) -> None: ...


def _timed_out() -> RagmeshError:
    return RagmeshError(ErrorCode.DEADLINE_EXCEEDED, "model runtime timed out")


def _unreachable(exc: BaseException) -> RagmeshError:
    return RagmeshError(ErrorCode.UNAVAILABLE, f"model runtime unreachable ({type(exc).__name__})")


class _Httpx:
    def __init__(self, client: httpx.AsyncClient) -> None:
        self._client = client

    async def send(self, method: str, path: str, content: bytes | None, headers: dict[str, str],
                   timeout: float | None) -> tuple[int, bytes]:
        try:
            resp = await self._client.request(method, path, content=content, headers=headers,
                                              timeout=self._client.timeout if timeout is None else timeout)
        except httpx.TimeoutException:
            raise _timed_out() from None
        except httpx.HTTPError as exc:
            raise _unreachable(exc) from None
        return resp.status_code, resp.content

    async def close(self) -> None:
        await self._client.aclose()


class _Aiohttp:
    """One aiohttp session per event loop that uses the client (made on its first call)."""

    def __init__(self, base_url: str, timeout: float) -> None:
        self._base_url = base_url
        self._timeout = timeout
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _open(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._loop is not loop:
            # A session belongs to the loop it was made in; one left in a finished loop is dropped.
            # Names are resolved again every 10 s (aiohttp's default): a restarted container may
            # come back at another address.
            connector = aiohttp.TCPConnector(keepalive_timeout=KEEPALIVE_EXPIRY_S)
            self._session = aiohttp.ClientSession(connector=connector)
            self._loop = loop
        return self._session

    async def send(self, method: str, path: str, content: bytes | None, headers: dict[str, str],
                   timeout: float | None) -> tuple[int, bytes]:
        headers = dict(headers)
        inject_request_context(headers)
        try:
            async with self._open().request(method, self._base_url + path, data=content, headers=headers,
                                            timeout=aiohttp.ClientTimeout(total=timeout or self._timeout)) as resp:
                return resp.status, await resp.read()
        except TimeoutError:
            raise _timed_out() from None
        except (aiohttp.ClientError, OSError) as exc:
            raise _unreachable(exc) from None

    async def close(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None
