"""Index version registry: which index versions each corpus has, which one serves, and who moved it.

Import the port and types from here; the PostgreSQL adapter lives in
``ragmesh_indexer.registry.postgres`` and is chosen by the indexer's composition root.
"""

from ragmesh_indexer.registry.model import (
    BuildProgress,
    BuildStats,
    Corpus,
    CorpusSpec,
    IndexVersion,
    PromotionResult,
    VersionEvent,
    VersionState,
)
from ragmesh_indexer.registry.port import IndexRegistry

__all__ = [
    "BuildProgress",
    "BuildStats",
    "Corpus",
    "CorpusSpec",
    "IndexRegistry",
    "IndexVersion",
    "PromotionResult",
    "VersionEvent",
    "VersionState",
]
