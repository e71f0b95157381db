"""Readiness: every downstream service answers, at least one corpus is active, and what each
model runtime being down means for answers.

``not_ready`` (503): a service or every corpus is missing; nothing useful can be answered.
``degraded`` (200): the services serve but a model runtime behind them does not, so answers come
with the flag that component sets (``embedding``: keyword-only search; ``rerank``: fused order
without the reranker; ``generation``: the retrieval summary instead of an answer).
A corpus whose index the serving embedder may not search by vector (not the embedder that built it,
nor one declared compatible: ragmesh_common.embedders.compatibility) is ``degraded`` too
(``embedding_model``), named in ``keyword_only`` with retrieval's reason.
``ready`` (200): everything serves.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from ragmesh_common.errors import RagmeshError

from ragmesh_gateway.catalog import CorpusCatalog, CorpusDirectory, CorpusInfo
from ragmesh_gateway.health.ports import DependencyProbe, ModelDependency

SERVING = "serving"
NOT_SERVING = "not_serving"
UNKNOWN = "unknown"  # the service does not report that model (a test double, an older service)


@dataclass(frozen=True, slots=True)
class Readiness:
    ready: bool
    checks: dict[str, str] = field(default_factory=dict)
    active_corpora: int = 0
    reason: str = ""
    models: dict[str, str] = field(default_factory=dict)
    degraded: list[str] = field(default_factory=list)
    keyword_only: dict[str, str] = field(default_factory=dict)  # corpus -> why

    @property
    def status(self) -> str:
        if not self.ready:
            return "not_ready"
        return "degraded" if self.degraded else "ready"


class ReadinessService:
    def __init__(
        self,
        probes: list[DependencyProbe],
        catalog: CorpusCatalog,
        directory: CorpusDirectory,
        *,
        models: list[ModelDependency] | None = None,
        timeout_s: float = 2.0,
    ) -> None:
        self._probes = probes
        self._models = list(models or [])
        self._catalog = catalog
        self._directory = directory
        self._timeout_s = timeout_s

    async def _probe(self, probe: DependencyProbe) -> bool:
        try:
            return await asyncio.wait_for(probe.is_serving(), self._timeout_s)
        except (asyncio.TimeoutError, RagmeshError):
            return False

    async def _model(self, model: ModelDependency) -> str:
        try:
            serving = await asyncio.wait_for(model.is_serving(), self._timeout_s)
        except (asyncio.TimeoutError, RagmeshError):
            serving = False
        return UNKNOWN if serving is None else SERVING if serving else NOT_SERVING

    async def _active_corpora(self) -> list[CorpusInfo] | None:
        try:
            served = tuple(sorted(await self._directory.corpus_ids()))
            corpora = await asyncio.wait_for(self._catalog.list_corpora(served), self._timeout_s)
        except (asyncio.TimeoutError, RagmeshError):
            return None
        return [c for c in corpora if c.state == "active"]

    async def check(self) -> Readiness:
        services, models, active = await asyncio.gather(
            asyncio.gather(*(self._probe(p) for p in self._probes)),
            asyncio.gather(*(self._model(m) for m in self._models)),
            self._active_corpora(),
        )
        checks = {p.name: SERVING if ok else NOT_SERVING for p, ok in zip(self._probes, services)}
        checks["corpora"] = SERVING if active else NOT_SERVING
        model_states = {m.name: state for m, state in zip(self._models, models)}
        reasons = [name for name, state in checks.items() if state != SERVING]
        down = [name for name, state in model_states.items() if state == NOT_SERVING]
        keyword_only = {c.corpus: c.keyword_only_reason for c in active or [] if c.search == "keyword_only"}
        degraded = down + (["embedding_model"] if keyword_only else [])
        if reasons:
            reason = "not ready: " + ", ".join(reasons)
        else:
            said = ["model runtime not serving for " + ", ".join(down)] if down else []
            said += [f"{corpus} is searched by keywords only: {why}" for corpus, why in sorted(keyword_only.items())]
            reason = "degraded: " + "; ".join(said) if said else ""
        return Readiness(
            ready=not reasons,
            checks=checks,
            active_corpora=len(active or []),
            reason=reason,
            models=model_states,
            degraded=degraded,
            keyword_only=keyword_only,
        )
