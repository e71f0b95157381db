"""Readiness: every downstream answers its health check and at least one corpus is active."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from ragmesh_common.errors import RagmeshError

from ragmesh_gateway.corpora.ports import CorpusCatalog, CorpusDirectory
from ragmesh_gateway.health.ports import DependencyProbe

SERVING = "serving"
NOT_SERVING = "not_serving"


@dataclass(frozen=True, slots=True)
class Readiness:
    ready: bool
    checks: dict[str, str] = field(default_factory=dict)
    active_corpora: int = 0
    reason: str = ""


class ReadinessService:
    def __init__(
        self,
        probes: list[DependencyProbe],
        catalog: CorpusCatalog,
        directory: CorpusDirectory,
        *,
        timeout_s: float = 2.0,
    ) -> None:
        self._probes = probes
        self._catalog = catalog
        self._directory = directory
        self._timeout_s = timeout_s

    async def _probe(self, probe: DependencyProbe) -> bool:
        try:
            return await asyncio.wait_for(probe.is_serving(), self._timeout_s)
        except (asyncio.TimeoutError, RagmeshError):
            return False

    async def _active_corpora(self) -> int | None:
        try:
            served = tuple(sorted(await self._directory.corpus_ids()))
            corpora = await asyncio.wait_for(self._catalog.list_corpora(served), self._timeout_s)
        except (asyncio.TimeoutError, RagmeshError):
            return None
        return sum(1 for c in corpora if c.state == "active")

    async def check(self) -> Readiness:
        results = await asyncio.gather(*(self._probe(p) for p in self._probes), self._active_corpora())
        serving, active = results[:-1], results[-1]
        checks = {p.name: SERVING if ok else NOT_SERVING for p, ok in zip(self._probes, serving)}
        checks["corpora"] = SERVING if active else NOT_SERVING
        reasons = [name for name, state in checks.items() if state != SERVING]
        return Readiness(
            ready=not reasons,
            checks=checks,
            active_corpora=active or 0,
            reason=("not ready: " + ", ".join(reasons)) if reasons else "",
        )
