"""Rerank metrics: the shared stage histogram, observed with stage="rerank"."""

from __future__ import annotations

from ragmesh_common.metrics import RETRIEVAL_STAGE_DURATION

STAGE_DURATION = RETRIEVAL_STAGE_DURATION
