"""A downstream dependency the gateway needs before it can serve traffic."""

from __future__ import annotations

import abc


class DependencyProbe(abc.ABC):
    name: str

    @abc.abstractmethod
    async def is_serving(self) -> bool:
        """True when the dependency answers its health check; never raises."""
