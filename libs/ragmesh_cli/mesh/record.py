"""Where a running mesh listens, recorded in its state folder for the commands that talk to it.

:meth:`Mesh.start` writes ``<state>/run/mesh.json`` once every process is ready and
:meth:`Mesh.stop` deletes it, so `ragmesh search`, `ragmesh index ci` and the others find the mesh
that serves from a folder, whatever ``--port-base`` it was started with
(ragmesh_cli.addresses reads it). The record is versioned (``format``); a reader refuses a format it
does not know rather than guess. It names the process that owns the mesh (`ragmesh up`, or a test)
by pid *and* start time, so a record that outlived its mesh (that process killed) is told apart
from a live one, as ragmesh_cli.mesh.lifecycle does for ``run/processes.json``.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

RECORD = Path("run") / "mesh.json"
FORMAT = 1


class UnreadableRecord(Exception):
    """A mesh record that is not JSON, or of a format this ragmesh does not read."""


@dataclass(frozen=True)
class MeshRecord:
    gateway_url: str
    # gRPC services by name (retrieval, rerank, generation, indexer): host:port
    grpc: dict[str, str]
    runtime_url: str
    owner: dict[str, Any]  # {"pid", "started"} of the process that started the mesh
    port_base: int | None = None
    auth_mode: str = "disabled"
    postgres: str = "embedded"  # or "external": RAGMESH_POSTGRES_URL named the server
    format: int = FORMAT
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def mcp_url(self) -> str:
        return f"{self.gateway_url}/mcp"

    def address(self, name: str) -> str:
        """The address of ``name``: gateway, mcp, widget, runtime or a gRPC service."""
        if name == "gateway":
            return self.gateway_url
        if name == "mcp":
            return self.mcp_url
        if name == "widget":
            return f"{self.gateway_url}/widget/"
        if name == "runtime":
            return self.runtime_url
        return self.grpc[name]

    def owner_alive(self) -> bool:
        """The process that started the mesh still runs (that very process, not a reused pid)."""
        from ragmesh_cli.mesh.lifecycle import recognise

        return recognise(self.owner) == "ours"


def path_in(state: Path) -> Path:
    return Path(state) / RECORD


def write(state: Path, record: MeshRecord) -> None:
    path = path_in(state)
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_suffix(f".{os.getpid()}.tmp")
    body = {k: v for k, v in asdict(record).items() if k != "extra"} | record.extra
    scratch.write_text(json.dumps(body, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    scratch.replace(path)


def read(state: Path) -> MeshRecord | None:
    """The record in ``state``, or None when there is none; UnreadableRecord when it cannot be read."""
    path = path_in(state)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UnreadableRecord(f"cannot read {path} ({exc.strerror})") from None
    try:
        body = json.loads(text)
    except ValueError:
        raise UnreadableRecord(f"{path} is not JSON") from None
    if not isinstance(body, dict):
        raise UnreadableRecord(f"{path} is not a JSON object")
    if body.get("format") != FORMAT:
        raise UnreadableRecord(f"{path} has format {body.get('format')!r}; this ragmesh reads format {FORMAT} "
                               "(restart the mesh with this version)")
    try:
        known = {name for name in MeshRecord.__dataclass_fields__ if name != "extra"}
        record = MeshRecord(**{k: v for k, v in body.items() if k in known},
                            extra={k: v for k, v in body.items() if k not in known})
    except TypeError as exc:
        raise UnreadableRecord(f"{path} lacks a field ({exc})") from None
    if not isinstance(record.gateway_url, str) or not isinstance(record.grpc, dict) or not isinstance(
            record.owner, dict):
        raise UnreadableRecord(f"{path} holds fields of the wrong type")
    return record


def remove(state: Path) -> None:
    path_in(state).unlink(missing_ok=True)
