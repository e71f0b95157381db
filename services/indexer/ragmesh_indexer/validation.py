"""Validation gates a candidate must pass before it may be promoted.

1. ``point_count`` — points in the collection == chunks the build recorded.
2. ``vector_config`` — vector size and embedding model id match what the runtime serves now.
3. ``quotes_at_lines`` — every chunk's quote is found at its recorded lines (or page) of the file.
4. ``internal_links`` — relative links between corpus files resolve (reported, never blocking).
5. ``probes`` — queries in ``<root>/.ragmesh-probes.yaml`` find their expected document in the top k
   of the candidate itself, through the same hybrid query retrieval runs.

A failing gate leaves the candidate unpromoted (state ``failed``) with the report in the registry.
Validating a version that already serves (``active``) or served (``previous``) changes nothing and
returns the report recorded when it passed, so rerunning ``ragmesh index ci`` on unchanged content
succeeds.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ragmesh_common.embedders.compatibility import index_embedder
from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.index_schema import collection_name
from ragmesh_common.lexical import LexicalEncoder
from ragmesh_common.vectorstore.port import HybridQuery, PointFilter, VectorStorePort
from ragmesh_indexer import metrics
from ragmesh_indexer.checkpoints import Checkpoint, no_checkpoint
from ragmesh_indexer.domain import QuoteLocator
from ragmesh_indexer.embedding import ChunkEmbedder
from ragmesh_indexer.registry import IndexRegistry, VersionState

PROBES_FILE = ".ragmesh-probes.yaml"
_LINK = re.compile(r"\]\((?!https?:|mailto:|#)([^)#\s]+)(?:#[^)\s]*)?\)")


@dataclass
class Gate:
    gate: str
    passed: bool
    detail: str
    blocking: bool = True


class Validator:
    def __init__(self, registry: IndexRegistry, store: VectorStorePort, embedder: ChunkEmbedder, *,
                 checkpoint: Checkpoint = no_checkpoint) -> None:
        self.registry = registry
        self.store = store
        self.embedder = embedder
        self.checkpoint = checkpoint

    async def validate(self, corpus: str, index_version: str, *, actor: str = "indexer") -> tuple[bool, list[Gate]]:
        version = await self.registry.get_version(corpus, index_version)
        if version.state in (VersionState.ACTIVE, VersionState.PREVIOUS):
            return True, _recorded(version.validation)
        if version.state not in (VersionState.CANDIDATE, VersionState.VALIDATED):
            raise RagmeshError(ErrorCode.CONFLICT, f"{index_version} is {version.state.value}; only candidates validate")
        spec = await self.registry.get_corpus(corpus)
        collection = collection_name(corpus, index_version)
        info = await self.store.get_collection(collection)
        gates: list[Gate] = []
        if not info.exists or info.metadata is None:
            gates.append(Gate("point_count", False, "collection is missing"))
        else:
            points = await self.store.count(collection)
            gates.append(Gate("point_count", points == version.stats.chunks and points > 0,
                              f"{points} points, {version.stats.chunks} chunks in the manifest"))
            model = await self.embedder.model_id()
            serving = (await self.embedder.identity()).with_dimension(
                len((await self.embedder.embed(["dimension probe"]))[0]))
            recorded, legacy = index_embedder(info.metadata)
            same = info.metadata.embedding_model == model if legacy else recorded.same_embedder(serving)
            ok = same and info.metadata.vector_size == serving.dimension
            gates.append(Gate("vector_config", ok, f"index built by {recorded.label}; runtime serves "
                              f"{serving.label}"))
            gates.append(await self._quotes(collection, Path(spec.root)))
            gates.append(await asyncio.to_thread(_links, Path(spec.root)))
            gates.append(await self._probes(corpus, collection, Path(spec.root), info.metadata.lexical_config))
        passed = all(g.passed for g in gates if g.blocking)
        for gate in gates:
            if gate.blocking and not gate.passed:
                metrics.count_gate_failure(corpus, gate.gate)
        report: dict[str, Any] = {"passed": passed, "gates": [g.__dict__ for g in gates]}
        await self.checkpoint("validated-gates")
        if passed:
            await self.registry.mark_validated(corpus, index_version, report, actor=actor)
        else:
            await self.registry.mark_failed(corpus, index_version, report, actor=actor, reason="validation failed")
        return passed, gates

    async def _quotes(self, collection: str, root: Path) -> Gate:
        locators: dict[str, QuoteLocator | None] = {}
        checked = missing = 0
        examples: list[str] = []
        offset: str | None = None
        while True:
            points, offset = await self.store.scroll(collection, offset=offset, limit=512)
            for p in points:
                path = p.payload.get("source_path", "")
                if path not in locators:
                    locators[path] = await asyncio.to_thread(_locator, root, path)
                locator = locators[path]
                found = locator is not None and locator.found(
                    p.payload.get("quote", ""), int(p.payload.get("line_start", 0)),
                    int(p.payload.get("line_end", 0)), int(p.payload.get("page", 0)))
                checked += 1
                if not found:
                    missing += 1
                    if len(examples) < 5:
                        examples.append(f"{path}:{p.payload.get('line_start')}-{p.payload.get('line_end')}")
            if offset is None:
                break
        detail = f"{checked - missing}/{checked} quotes found at their lines"
        return Gate("quotes_at_lines", missing == 0, detail + (f"; not found: {', '.join(examples)}" if examples else ""))

    async def _probes(self, corpus: str, collection: str, root: Path, lexical_config: dict) -> Gate:
        probes = _read_probes(root)
        if not probes:
            return Gate("probes", True, f"no probes configured ({PROBES_FILE})")
        lexical = LexicalEncoder.from_dict(lexical_config) if lexical_config else LexicalEncoder()
        failures = []
        vectors = await self.embedder.embed([p["query"] for p in probes])
        for probe, vector in zip(probes, vectors):
            k = int(probe.get("top_k", 5))
            sparse = lexical.encode_query(probe["query"])
            hits = await self.store.hybrid_query(HybridQuery(
                collection=collection, filter=PointFilter(corpora=(corpus,)), limit=k, dense=vector,
                sparse=_sparse(sparse)))
            paths = [h.payload.get("source_path") for h in hits]
            if probe["expect"] not in paths:
                failures.append(f"{probe['query']!r} -> expected {probe['expect']} in top {k}")
        return Gate("probes", not failures, f"{len(probes) - len(failures)}/{len(probes)} probes passed"
                    + (f"; {'; '.join(failures[:3])}" if failures else ""))


def _recorded(report: dict[str, Any] | None) -> list[Gate]:
    gates = (report or {}).get("gates") or []
    recorded = [Gate(g.get("gate", ""), bool(g.get("passed")), f"recorded: {g.get('detail', '')}",
                     bool(g.get("blocking", True))) for g in gates if isinstance(g, dict)]
    return recorded or [Gate("recorded", True, "promoted before gates were recorded")]


def _sparse(vector):
    from ragmesh_common.vectorstore.port import SparseVector

    return SparseVector(list(vector.indices), list(vector.values))


def _locator(root: Path, path: str) -> QuoteLocator | None:
    try:
        return QuoteLocator((root / path).read_bytes())
    except OSError:
        return None


def _read_probes(root: Path) -> list[dict]:
    path = root / PROBES_FILE
    if not path.is_file():
        return []
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or []
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise RagmeshError(ErrorCode.VALIDATION_FAILED, f"{PROBES_FILE} is not valid YAML") from exc
    probes = data.get("probes", []) if isinstance(data, dict) else data
    return [p for p in probes if isinstance(p, dict) and p.get("query") and p.get("expect")]


def _links(root: Path) -> Gate:
    broken = []
    total = 0
    real_root = root.resolve()
    for md in sorted(root.rglob("*.md")):
        if any(part.startswith(".") for part in md.relative_to(root).parts):
            continue
        # Only regular files inside the root: opening a FIFO blocks forever, and a symlink leaving
        # the root is not corpus content (the scan archived both).
        if not md.is_file() or not md.resolve().is_relative_to(real_root):
            continue
        try:
            text = md.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        for match in _LINK.finditer(text):
            total += 1
            target = (md.parent / match.group(1)).resolve()
            if not target.exists():
                broken.append(f"{md.relative_to(root)} -> {match.group(1)}")
    detail = f"{total - len(broken)}/{total} internal links resolve"
    if broken:
        detail += f"; broken: {', '.join(broken[:5])}"
    return Gate("internal_links", not broken, detail, blocking=False)
