"""What a Qdrant Edge root folder holds besides the shards: collections, aliases, metadata.

An edge shard is one collection without a name, aliases or metadata, so the root keeps them itself:

    <root>/catalog.json     {"format": 1, "collections": {name: {folder, vector_size, metadata}},
                             "aliases": {alias: collection}}
    <root>/shards/<folder>  one EdgeShard per collection; the folder is a fresh random name, so a
                            collection deleted and created again never meets its predecessor's files
    <root>/lock             flock held while a process has the root open (one process at a time)

Every change writes a complete new catalog next to the old one, fsyncs it and ``os.replace``-s it
in: an alias swap is one rename, so a reader (or a restart after a crash) sees the old or the new
target, never none. Shard folders are created before the catalog names them and removed after it
stops naming them; a crash in between leaves an unnamed folder, swept away at the next open.

Not thread-safe: its owner calls it from one thread.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import msgspec

from ragmesh_common.errors import ErrorCode, RagmeshError

log = logging.getLogger("ragmesh.vectorstore.edge")

CATALOG_FORMAT = 1


class CatalogEntry(msgspec.Struct, frozen=True):
    folder: str
    vector_size: int
    metadata: dict[str, Any] = {}


class CatalogState(msgspec.Struct, frozen=True):
    format: int = CATALOG_FORMAT
    collections: dict[str, CatalogEntry] = {}
    aliases: dict[str, str] = {}


class EdgeCatalog:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.shards_dir = root / "shards"
        self.path = root / "catalog.json"
        self.shards_dir.mkdir(parents=True, exist_ok=True)
        self._lock = _lock_root(root)
        try:
            self.state = self._load()
            self._sweep_unnamed_folders()
        except BaseException:
            self.release()
            raise

    # --- reading -----------------------------------------------------------------------------

    def resolve(self, name: str) -> str:
        """The collection ``name`` is or points at (an alias); NOT_FOUND otherwise."""
        if name in self.state.collections:
            return name
        target = self.state.aliases.get(name)
        if target is None or target not in self.state.collections:
            raise RagmeshError(ErrorCode.NOT_FOUND, "collection not found")
        return target

    def entry(self, collection: str) -> CatalogEntry:
        return self.state.collections[collection]

    def shard_path(self, collection: str) -> Path:
        return self.shards_dir / self.state.collections[collection].folder

    # --- changing ----------------------------------------------------------------------------

    def new_folder(self) -> Path:
        return self.shards_dir / uuid.uuid4().hex

    def add_collection(self, name: str, folder: Path, vector_size: int, metadata: dict[str, Any]) -> None:
        entry = CatalogEntry(folder=folder.name, vector_size=vector_size, metadata=metadata)
        self._save(msgspec.structs.replace(self.state, collections={**self.state.collections, name: entry}))

    def remove_collection(self, name: str) -> Path | None:
        """Drops ``name`` and every alias pointing at it (as Qdrant does); the folder to delete."""
        entry = self.state.collections.get(name)
        if entry is None:
            return None
        collections = {k: v for k, v in self.state.collections.items() if k != name}
        aliases = {a: c for a, c in self.state.aliases.items() if c != name}
        self._save(CatalogState(collections=collections, aliases=aliases))
        return self.shards_dir / entry.folder

    def set_alias(self, alias: str, collection: str | None) -> None:
        aliases = dict(self.state.aliases)
        if collection is None:
            if aliases.pop(alias, None) is None:
                return
        else:
            if collection not in self.state.collections:
                raise RagmeshError(ErrorCode.NOT_FOUND, f"collection {collection} does not exist")
            if alias in self.state.collections:
                raise RagmeshError(ErrorCode.CONFLICT, "collection or alias already exists")
            aliases[alias] = collection
        self._save(msgspec.structs.replace(self.state, aliases=aliases))

    def release(self) -> None:
        if self._lock is not None:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            os.close(self._lock)
            self._lock = None

    # --- storage -----------------------------------------------------------------------------

    def _load(self) -> CatalogState:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return CatalogState()
        try:
            state = msgspec.json.decode(raw, type=CatalogState)
        except (msgspec.DecodeError, msgspec.ValidationError):
            raise RagmeshError(ErrorCode.UNAVAILABLE, f"vector store catalog {self.path} is unreadable") from None
        if state.format != CATALOG_FORMAT:
            raise RagmeshError(ErrorCode.UNAVAILABLE, f"vector store catalog format {state.format} is unknown")
        return state

    def _save(self, state: CatalogState) -> None:
        """Write, fsync, rename, fsync the folder; memory changes only once the disk has."""
        tmp = self.path.with_suffix(".json.tmp")
        with open(tmp, "wb") as handle:
            handle.write(msgspec.json.encode(state))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self.path)
        _fsync_dir(self.root)
        self.state = state

    def _sweep_unnamed_folders(self) -> None:
        named = {entry.folder for entry in self.state.collections.values()}
        for folder in self.shards_dir.iterdir():
            if folder.name not in named:
                log.info("removing a shard folder no collection names", extra={"fields": {"folder": folder.name}})
                shutil.rmtree(folder, ignore_errors=True)


def _lock_root(root: Path) -> int:
    fd = os.open(root / "lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise RagmeshError(
            ErrorCode.UNAVAILABLE, f"the edge vector store {root} is open in another process"
        ) from None
    return fd


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
