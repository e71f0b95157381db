"""Hugging Face TEI's HTTP API: /embed, /v1/embeddings, /rerank, /tokenize, /decode, /info, /health.

The wire format follows TEI's OpenAPI document (vendored, with its version, in tests/conformance/tei)
and, where the document and TEI's router disagree, the router: a real TEI container can replace this
process by configuration alone. /info adds a "ragmesh" object that says plainly what is computed here,
and which of TEI's routes this runtime does not offer (they answer 424, as TEI does for a model that
cannot serve them). A ragmesh header, ``X-Ragmesh-Priority: bulk``, marks /embed, /v1/embeddings
and /rerank requests as bulk work (an index build's), which the batcher serves after interactive ones.
"""

from __future__ import annotations

import base64

import msgspec
from litestar import Controller, Request, Response, get, post
from litestar.datastructures import State
from litestar.di import Provide

from ragmesh_common.clients import PRIORITY_HEADER
from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_runtime import __version__
from ragmesh_runtime.batching import Priority
from ragmesh_runtime.chat import ChatGenerator
from ragmesh_runtime.http.schemas import (
    DecodeRequest,
    EmbedRequest,
    OpenAiEmbeddingsRequest,
    RerankRequest,
    TokenizeRequest,
    decode_body,
    embed_inputs,
    id_lists,
)
from ragmesh_runtime.service import RuntimeService

# TEI routes this runtime does not serve, and why (TEI itself answers 424 for a model that cannot).
NOT_OFFERED = {
    "/embed_sparse": "needs a SPLADE model; the embedding model here is dense (all-MiniLM-L6-v2)",
    "/embed_all": "per-token embeddings are not exposed by this runtime",
    "/predict": "needs a sequence-classification model; none is loaded",
    "/similarity": "not implemented here: embed with /embed and compare the vectors",
}


def provide_service(state: State) -> RuntimeService:
    return state.runtime_service


def _json(content: object, status: int = 200) -> Response[bytes]:
    return Response(content=msgspec.json.encode(content), status_code=status, media_type="application/json")


def _refuse_prompt_name(prompt_name: str | None) -> None:
    if prompt_name is not None:
        raise RagmeshError(ErrorCode.INVALID_ARGUMENT, "prompt_name is not supported: this model has no prompts")


def _priority(request: Request) -> Priority:
    """Interactive unless the request says otherwise; a value the batcher does not know is refused,
    so a misspelt "bulk" cannot silently hold up searches."""
    value = request.headers.get(PRIORITY_HEADER)
    if value is None:
        return Priority.INTERACTIVE
    try:
        return Priority(value)
    except ValueError:
        known = " or ".join(priority.value for priority in Priority)
        raise RagmeshError(ErrorCode.INVALID_ARGUMENT, f"{PRIORITY_HEADER} must be {known}") from None


class TeiController(Controller):
    dependencies = {"service": Provide(provide_service, sync_to_thread=False)}

    @post("/embed", status_code=200)
    async def embed(self, request: Request, service: RuntimeService) -> Response[bytes]:
        body = decode_body(await request.body(), EmbedRequest)
        _refuse_prompt_name(body.prompt_name)
        embedded = await service.embed(
            embed_inputs(body.inputs), body.normalize, body.truncate,
            truncate_left=body.truncation_direction.lower() == "left", dimensions=body.dimensions,
            priority=_priority(request),
        )
        return _json(embedded.vectors.tolist())

    @post("/v1/embeddings", status_code=200)
    async def openai_embeddings(self, request: Request, service: RuntimeService) -> Response[bytes]:
        """TEI's OpenAI-compatible route: always normalized, truncated as /embed's default."""
        body = decode_body(await request.body(), OpenAiEmbeddingsRequest)
        embedded = await service.embed(embed_inputs(body.input), True, None, dimensions=body.dimensions,
                                       priority=_priority(request))
        if body.encoding_format == "base64":
            # Little-endian float32 bytes, as TEI packs them.
            vectors = [base64.b64encode(v.astype("<f4").tobytes()).decode("ascii") for v in embedded.vectors]
        else:
            vectors = embedded.vectors.tolist()
        return _json({
            "object": "list",
            "data": [{"object": "embedding", "embedding": v, "index": i} for i, v in enumerate(vectors)],
            "model": service.models.embedding.model_id,
            "usage": {"prompt_tokens": embedded.tokens, "total_tokens": embedded.tokens},
        })

    @post("/tokenize", status_code=200)
    async def tokenize(self, request: Request, service: RuntimeService) -> Response[bytes]:
        body = decode_body(await request.body(), TokenizeRequest)
        _refuse_prompt_name(body.prompt_name)
        texts = [body.inputs] if isinstance(body.inputs, str) else body.inputs
        if any(not text for text in texts):
            raise RagmeshError(ErrorCode.QUERY_EMPTY, "`inputs` cannot be empty")
        tokenized = await service.tokenize(texts, body.add_special_tokens)
        return _json([[_token(t) for t in tokens] for tokens in tokenized])

    @post("/decode", status_code=200)
    async def decode(self, request: Request, service: RuntimeService) -> Response[bytes]:
        body = decode_body(await request.body(), DecodeRequest)
        return _json(await service.decode(id_lists(body.ids), body.skip_special_tokens))

    @post(list(NOT_OFFERED), status_code=200)
    async def not_offered(self, request: Request) -> Response[bytes]:
        path = request.url.path
        raise RagmeshError(ErrorCode.RUNTIME_ERROR, f"{path} is not offered by the ragmesh CPU runtime: "
                           f"{NOT_OFFERED[path]}")

    @post("/rerank", status_code=200)
    async def rerank(self, request: Request, service: RuntimeService) -> Response[bytes]:
        body = decode_body(await request.body(), RerankRequest)
        raw = await service.rerank(body.query, body.texts, body.truncate, priority=_priority(request))
        # TEI's non-raw scores live in [0, 1]; each scorer says how its scores get there.
        scores = raw if body.raw_scores else service.scorer.bounded(raw)
        order = sorted(range(len(body.texts)), key=lambda i: (-float(scores[i]), i))
        ranks = []
        for index in order:
            rank: dict[str, object] = {"index": index, "score": float(scores[index])}
            if body.return_text:
                rank["text"] = body.texts[index]
            ranks.append(rank)
        return _json(ranks)

    @get("/info")
    async def info(self, request: Request, service: RuntimeService) -> Response[bytes]:
        return _json(build_info(service, request.app.state.chat_generator))

    @get("/health")
    async def health(self, service: RuntimeService) -> Response[bytes]:
        await service.check_health()
        return Response(content=b"", status_code=200, media_type="text/plain")


def _token(token) -> dict[str, object]:
    return {"id": token.id, "text": token.text, "special": token.special, "start": token.start, "stop": token.stop}


def build_info(service: RuntimeService, chat: ChatGenerator) -> dict[str, object]:
    settings = service.settings
    encoder, embedding = service.models.encoder, service.models.embedding
    return {
        # TEI's fields, describing the embedding model this process serves.
        "model_id": embedding.model_id,
        "served_model_name": embedding.model_id,
        "model_sha": embedding.sha256,
        "model_dtype": "int8",
        "model_type": {"embedding": {"pooling": "mean"}},
        "max_concurrent_requests": settings.server.max_concurrent_requests,
        "max_input_length": encoder.max_input_tokens,
        "max_batch_tokens": settings.embedding.max_batch_tokens,
        "max_batch_requests": settings.embedding.max_batch_requests or None,
        "max_client_batch_size": settings.embedding.max_client_batch_size,
        "auto_truncate": settings.embedding.auto_truncate,
        "tokenization_workers": 1,
        "version": __version__,
        "sha": None,
        "docker_label": None,
        # What really happens behind each route; not part of TEI's schema.
        "ragmesh": {
            "runtime": "ragmesh-runtime (CPU, ONNX Runtime)",
            "endpoints": {
                "/embed": (
                    f"all-MiniLM-L6-v2 int8 ONNX, {embedding.products} products, {encoder.dimension}-d, "
                    "mean pooling over the attention mask, L2-normalised when normalize=true; inputs cut "
                    f"at {encoder.max_input_tokens} tokens when truncate=true; token-id inputs are the model "
                    "input as given; dimensions keeps the first components, then normalizes (the model is "
                    "not Matryoshka-trained, so a cut vector is a rougher one)"
                ),
                "/v1/embeddings": "the /embed vectors in OpenAI's embeddings format (normalized, float or base64)",
                "/tokenize": "the model's own WordPiece tokenizer, with character offsets",
                "/decode": "the same tokenizer, ids back to text",
                "/rerank": service.scorer.description,
                "/v1/chat/completions": chat.describe()["description"],
            },
            "not_offered": NOT_OFFERED,
            "rerank_method": service.scorer.name,
            "rerank_max_texts": settings.rerank.max_texts,
            "embedding_cache": (
                f"LRU of {settings.embedding.cache_entries} vectors keyed by the exact token ids, shared by "
                "/embed and /rerank windows (a hit returns the vector the model computed before); LRUs of "
                "the same size keep each text's WordPiece ids and BM25 term ids, so reranking a text seen "
                "before reads it from memory"
                if settings.embedding.cache_entries else "off"
            ),
            "rerank_scores": "raw_scores=false clamps the score to [0, 1]; it is not a probability",
            "generator_model_id": chat.model_id,
            # What answers /v1/chat/completions (RAGMESH_RUNTIME_GENERATOR), with its model file.
            "generator": chat.describe(),
            # The embedder's identity beyond TEI's fields (ragmesh_common.embedders.identity reads both).
            "embedder": {
                "base_model": "sentence-transformers/all-MiniLM-L6-v2",
                "format": "onnx",
                "quantization": f"{embedding.quantization}; docs/runtime.md#model-identity says which "
                                "servers may share its indexes",
                "products": embedding.products,  # RAGMESH_RUNTIME_EMBED_PRODUCTS
                "dimension": encoder.dimension,
                "weights_sha256": embedding.sha256,
            },
            "model_files": [verified.describe() for verified in service.models.files],
            "model_load_seconds": round(service.models.load_seconds, 3),
            "network": "none: weights come from installed packages; hub downloads are disabled",
        },
    }
