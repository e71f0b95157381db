"""The indexer as the mesh runs it: the retrieval process (owner of the local Qdrant store, serving
ragmesh.v1.VectorStore), the indexer process and the `ragmesh` CLI, each a real OS process.

The CPU runtime comes from the session's ``runtime_url`` fixture. Each stack has its own ports,
state folder and registry schema, so stacks never see each other.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import asyncpg

from ragmesh_cli.mesh import Mesh, MeshPorts
from ragmesh_common.index_schema import alias_name
from ragmesh_common.rpc.client import open_channel
from ragmesh_common.vectorstore.grpc_store import GrpcVectorStore


class IndexerStack:
    def __init__(self, folder: Path, *, runtime_url: str, pg_url: str, schema: str,
                 env: dict[str, str] | None = None) -> None:
        self.folder = folder
        self.pg_url = pg_url
        self.schema = schema
        self.fault_file = folder / "fault"
        extra = {"RAGMESH_POSTGRES_URL": pg_url, "RAGMESH_INDEXER_PG_SCHEMA": schema,
                 "RAGMESH_INDEXER_FAULT_FILE": str(self.fault_file), "RAGMESH_LOG_LEVEL": "info", **(env or {})}
        self.mesh = Mesh(state_dir=folder / "state", ports=MeshPorts.free_block(), extra_env=extra,
                         runtime_url=runtime_url)
        self.indexer_addr = f"127.0.0.1:{self.mesh.ports.port('indexer')}"
        self._channel = None
        self.store: GrpcVectorStore | None = None

    # --- processes ---------------------------------------------------------------------------
    def start(self) -> None:
        self.mesh.start_one("retrieval")
        self.mesh.wait_ready("retrieval", timeout=120)
        self.start_indexer()

    def start_indexer(self, **env: str) -> None:
        self.mesh.start_one("indexer", {**self.mesh.env(), **env})
        self.mesh.wait_ready("indexer", timeout=120)

    def wait_indexer_exit(self, timeout: float = 60) -> int:
        proc = self.mesh.processes.pop("indexer")
        return proc.wait(timeout=timeout)

    def stop(self) -> None:
        self.mesh.stop_one("indexer", sig=signal.SIGTERM)
        self.mesh.stop_one("retrieval", sig=signal.SIGTERM)

    def arm(self, checkpoint: str) -> None:
        """The running indexer dies (exit 137) at this checkpoint (``name`` or ``name#n``)."""
        self.fault_file.write_text(checkpoint, encoding="utf-8")

    # --- the CLI -------------------------------------------------------------------------------
    def cli(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "ragmesh_cli.main", *args, "--addr", self.indexer_addr],
                              env=self.mesh.env(), capture_output=True, text=True, timeout=timeout)

    def cli_json(self, *args: str) -> dict:
        done = self.cli(*args)
        assert done.returncode == 0, (done.returncode, done.stderr[-3000:])
        return json.loads(done.stdout)

    # --- what serves and what the registry says ------------------------------------------------
    async def aliases(self) -> dict[str, str]:
        if self.store is None:
            self._channel = open_channel(f"127.0.0.1:{self.mesh.ports.port('retrieval')}")
            self.store = GrpcVectorStore(self._channel)
        return await self.store.get_aliases()

    async def served(self, corpus: str) -> str:
        return (await self.aliases()).get(alias_name(corpus), "")

    async def versions(self, corpus: str) -> list[dict]:
        """Rows of the registry, newest first, read with plain SQL (not through the indexer)."""
        conn = await asyncpg.connect(self.pg_url)
        try:
            rows = await conn.fetch(
                f"""SELECT index_version, state, collection, (stats->>'chunks')::int AS chunks
                    FROM {self.schema}.index_versions WHERE corpus = $1 ORDER BY seq DESC""", corpus)
        finally:
            await conn.close()
        return [dict(r) for r in rows]

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()
