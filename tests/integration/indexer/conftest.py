"""Indexer integration fixtures: the real CPU runtime, a local Qdrant store and a PostgreSQL registry."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ragmesh_bench.harness import NotServing, serve_on_free_port

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="session")
def runtime_url(tmp_path_factory) -> str:
    """The CPU model runtime as its own process, like in the embedded mesh."""
    log = tmp_path_factory.mktemp("runtime") / "runtime.log"
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")

    def start(port: int) -> subprocess.Popen:
        with open(log, "ab") as out:
            return subprocess.Popen([sys.executable, "-m", "ragmesh_runtime", "--port", str(port)],
                                    stdout=out, stderr=subprocess.STDOUT, env=env)

    try:
        port, proc = serve_on_free_port(start, "/health", timeout=120)
    except NotServing as exc:
        pytest.fail(f"{exc}: {log.read_text()[-2000:]}")
    yield f"http://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(timeout=20)


@pytest.fixture
def corpus_copy(tmp_path: Path) -> Path:
    dest = tmp_path / "corpus"
    shutil.copytree(ROOT / "tests" / "fixtures" / "e2e_corpus", dest)
    return dest


@pytest.fixture
async def indexer(tmp_path: Path, pg_url: str, unique_schema, runtime_url: str):
    """The indexer's application services in-process, as app.py assembles them, over a real
    PostgreSQL registry, a local Qdrant store, manifests under tmp_path and the real runtime."""
    from datetime import timedelta
    from types import SimpleNamespace

    from qdrant_client import AsyncQdrantClient

    from ragmesh_common.clients.tei import TeiClient
    from ragmesh_common.vectorstore.qdrant import QdrantVectorStore
    from ragmesh_indexer.build import BuildOptions, IndexBuilder
    from ragmesh_indexer.domain import ChunkingConfig
    from ragmesh_indexer.embedding import ChunkEmbedder
    from ragmesh_indexer.inspection import CorpusInspector
    from ragmesh_indexer.manifests import FileManifestStore
    from ragmesh_indexer.promotion import Promoter
    from ragmesh_indexer.registry.postgres import PostgresIndexRegistry
    from ragmesh_indexer.validation import Validator

    registry = await PostgresIndexRegistry.open(pg_url, schema=unique_schema("idx"))
    store = QdrantVectorStore(AsyncQdrantClient(path=str(tmp_path / "qdrant")))
    tei = TeiClient(runtime_url)
    embedder = ChunkEmbedder(tei, batch=16)
    manifests = FileManifestStore(tmp_path / "manifests")
    options = BuildOptions(chunking=ChunkingConfig(), max_file_bytes=64 * 1024, url_base="https://docs.example/")
    yield SimpleNamespace(
        registry=registry, store=store, manifests=manifests, options=options,
        builder=IndexBuilder(registry, store, embedder, options, manifests=manifests),
        validator=Validator(registry, store, embedder),
        promoter=Promoter(registry, store, retire_after=timedelta(hours=1)),
        inspector=CorpusInspector(registry, manifests, max_file_bytes=options.max_file_bytes),
    )
    await tei.close()
    await store.close()
    await registry.close()
