"""How a collection's dense vectors are indexed and laid out, for both Qdrant adapters.

One declaration read from the environment by :func:`load_index_config` (retrieval and the indexer
both create collections, so both carry it):

- below ``hnsw_min_points`` points a collection is searched exactly, as it always was; from there on
  it gets Qdrant's HNSW graph (``m``, ``ef_construct``; ``ef`` candidates at query time), optionally
  over int8 scalar-quantized vectors with the top candidates rescored on the original floats.
  bench/scale.py measures where HNSW starts to pay (docs/performance.md, "Store at scale");
- ``on_disk``: original vectors (and the graph) memory-mapped from disk rather than held in RAM,
  for collections larger than memory; with int8 quantization the quantized copy stays in RAM;
- a Qdrant server cluster's ``shard_number``, ``replication_factor`` and
  ``write_consistency_factor`` for every new collection (an existing one keeps its layout);
- ``min_free_mb``: the embedded store refuses a write, or an index build, that could leave less
  free disk than this (the engine memory-maps its files, and a full disk under a mapping kills
  the process with SIGBUS instead of failing the write).

Values that make no sense stop the process at start with a message naming the variable.
"""

from __future__ import annotations

import msgspec

from ragmesh_common.settings import env_bool, env_float, env_int, env_str

QUANTIZATIONS = ("none", "int8")
# bench/scale.py measured HNSW beating exact search from 5,000 points already (docs/performance.md,
# "Store at scale"); the default stays above that crossover so that the collections whose quality
# was evaluated (SciFact's 16,041 chunks) keep exact search until an evaluation with the graph says
# otherwise. A smaller collection stays exact, which is also what local mode does.
DEFAULT_HNSW_MIN_POINTS = 20_000


class VectorIndexConfig(msgspec.Struct, frozen=True):
    hnsw_min_points: int = DEFAULT_HNSW_MIN_POINTS  # RAGMESH_VECTOR_HNSW_MIN_POINTS
    hnsw_m: int = 32  # RAGMESH_VECTOR_HNSW_M: graph edges per node (bench/scale.py: docs/performance.md)
    hnsw_ef_construct: int = 200  # RAGMESH_VECTOR_HNSW_EF_CONSTRUCT
    # RAGMESH_VECTOR_HNSW_EF: candidates at query time (at least the request's limit). 256: recall@10
    # 0.9895 at 100k SciFact-derived chunks, where 128 gave 0.978, at no measurable latency cost.
    hnsw_ef: int = 256
    quantization: str = "none"  # RAGMESH_VECTOR_QUANTIZATION: none | int8
    rescore: bool = True  # RAGMESH_VECTOR_RESCORE: rescore quantized candidates on the original vectors
    oversampling: float = 2.0  # RAGMESH_VECTOR_OVERSAMPLING: quantized candidates per result, before rescoring
    on_disk: bool = False  # RAGMESH_VECTOR_ON_DISK
    shard_number: int = 1  # RAGMESH_QDRANT_SHARD_NUMBER (Qdrant server only)
    replication_factor: int = 1  # RAGMESH_QDRANT_REPLICATION_FACTOR (Qdrant server only)
    write_consistency_factor: int = 1  # RAGMESH_QDRANT_WRITE_CONSISTENCY_FACTOR (Qdrant server only)
    min_free_mb: int = 256  # RAGMESH_EDGE_MIN_FREE_MB (embedded store only)

    def __post_init__(self) -> None:
        for problem in self.problems():
            raise ValueError(problem)

    def problems(self) -> list[str]:
        """Each setting that makes no sense, as ``VARIABLE=value: why``."""
        checks = [
            (self.hnsw_min_points >= 0, "RAGMESH_VECTOR_HNSW_MIN_POINTS", self.hnsw_min_points, "must be 0 or more"),
            (4 <= self.hnsw_m <= 128, "RAGMESH_VECTOR_HNSW_M", self.hnsw_m,
             "must be 4..128 (edges per node; 0 would build no graph)"),
            (self.hnsw_ef_construct >= 4, "RAGMESH_VECTOR_HNSW_EF_CONSTRUCT", self.hnsw_ef_construct,
             "must be 4 or more"),
            (self.hnsw_ef >= 1, "RAGMESH_VECTOR_HNSW_EF", self.hnsw_ef, "must be 1 or more"),
            (self.quantization in QUANTIZATIONS, "RAGMESH_VECTOR_QUANTIZATION", self.quantization,
             f"must be one of {', '.join(QUANTIZATIONS)}"),
            (self.oversampling >= 1.0, "RAGMESH_VECTOR_OVERSAMPLING", self.oversampling, "must be 1.0 or more"),
            (self.shard_number >= 1, "RAGMESH_QDRANT_SHARD_NUMBER", self.shard_number, "must be 1 or more"),
            (self.replication_factor >= 1, "RAGMESH_QDRANT_REPLICATION_FACTOR", self.replication_factor,
             "must be 1 or more"),
            (1 <= self.write_consistency_factor <= self.replication_factor,
             "RAGMESH_QDRANT_WRITE_CONSISTENCY_FACTOR", self.write_consistency_factor,
             f"must be 1..RAGMESH_QDRANT_REPLICATION_FACTOR ({self.replication_factor})"),
            (self.min_free_mb >= 0, "RAGMESH_EDGE_MIN_FREE_MB", self.min_free_mb, "must be 0 or more"),
        ]
        return [f"{name}={value!r}: {why}" for ok, name, value, why in checks if not ok]

    @property
    def quantized(self) -> bool:
        return self.quantization != "none"

    def uses_hnsw(self, points: int) -> bool:
        return points >= self.hnsw_min_points


def load_index_config(service: str) -> VectorIndexConfig:
    """The RAGMESH_VECTOR_* / RAGMESH_QDRANT_* / RAGMESH_EDGE_MIN_FREE_MB settings; SystemExit naming
    the variable when one makes no sense."""
    try:
        return VectorIndexConfig(
            hnsw_min_points=env_int("RAGMESH_VECTOR_HNSW_MIN_POINTS", DEFAULT_HNSW_MIN_POINTS),
            hnsw_m=env_int("RAGMESH_VECTOR_HNSW_M", 32),
            hnsw_ef_construct=env_int("RAGMESH_VECTOR_HNSW_EF_CONSTRUCT", 200),
            hnsw_ef=env_int("RAGMESH_VECTOR_HNSW_EF", 256),
            quantization=env_str("RAGMESH_VECTOR_QUANTIZATION", "none").strip().lower(),
            rescore=env_bool("RAGMESH_VECTOR_RESCORE", True),
            oversampling=env_float("RAGMESH_VECTOR_OVERSAMPLING", 2.0),
            on_disk=env_bool("RAGMESH_VECTOR_ON_DISK", False),
            shard_number=env_int("RAGMESH_QDRANT_SHARD_NUMBER", 1),
            replication_factor=env_int("RAGMESH_QDRANT_REPLICATION_FACTOR", 1),
            write_consistency_factor=env_int("RAGMESH_QDRANT_WRITE_CONSISTENCY_FACTOR", 1),
            min_free_mb=env_int("RAGMESH_EDGE_MIN_FREE_MB", 256),
        )
    except ValueError as exc:
        raise SystemExit(f"ragmesh-{service}: {exc}") from None
