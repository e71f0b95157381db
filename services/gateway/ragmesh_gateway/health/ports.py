"""What the gateway needs before it can serve traffic, and the model runtimes behind it."""

from __future__ import annotations

import abc


class DependencyProbe(abc.ABC):
    name: str

    @abc.abstractmethod
    async def is_serving(self) -> bool:
        """True when the dependency answers its health check; never raises."""


class ModelDependency(abc.ABC):
    """A model runtime a downstream service calls (embedding for retrieval, rerank, generation),
    as that service sees it. Without it the mesh still answers, degraded (health/service.py)."""

    name: str

    @abc.abstractmethod
    async def is_serving(self) -> bool | None:
        """True/False as the service reports it; None when the service does not report it."""
