"""Fixtures for the indexer domain tests: the committed mixed corpus and a writable copy of it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

MIXED_CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "mixed_corpus"


@pytest.fixture
def mixed_corpus() -> Path:
    return MIXED_CORPUS


@pytest.fixture
def corpus_copy(tmp_path: Path) -> Path:
    """The mixed corpus plus what git cannot hold: a symlink leaving the root (to a real file
    outside it) and a symlink that stays inside."""
    root = tmp_path / "corpus"
    shutil.copytree(MIXED_CORPUS, root, symlinks=True)
    outside = tmp_path / "outside-secret.md"
    outside.write_text("# Secret\n\nThis file lives outside the corpus root.\n", encoding="utf-8")
    (root / "escape.md").symlink_to(outside)
    (root / "guide" / "alias.md").symlink_to(root / "guide" / "intro.md")
    return root
