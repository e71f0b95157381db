"""Scanning a corpus: which files exist, what each one is, and the manifest that records it.

Every file the patterns select gets exactly one manifest entry, whatever is wrong with it: a bad
file is archived with a reason (binary, invalid UTF-8, too large, a symlink leaving the root,
``index: false``, an unsupported format) or, when it should have been indexable but yielded no
text, marked failed. Scanning never raises for a file; :func:`require_all_indexable` turns the
failures into one build error.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec

from ragmesh_common.errors import ErrorCode, RagmeshError

from .globs import PathFilter
from .model import (
    ArchiveReason,
    FailureReason,
    FileIssue,
    FileStatus,
    Manifest,
    ManifestEntry,
    ParsedDocument,
    ScanResult,
)
from .parsing import parse_document, parse_text, parser_for
from .text import canonical_sha256, decode_utf8, sha256_hex

# Version-control metadata is never corpus content, whatever the patterns say.
_VCS_DIRS = frozenset({".git", ".hg", ".svn"})
_SNIFF_BYTES = 8192


class ScanConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    include: list[str] = msgspec.field(default_factory=lambda: ["**"])
    exclude: list[str] = []
    max_file_bytes: int = 20 * 1024 * 1024
    # Dotfiles and dot-directories (.DS_Store, .obsidian/, .gitattributes) are tool state, not
    # documents; a corpus that really publishes them opts in.
    include_hidden: bool = False


# Told (files done, files selected) after each file; the indexer reports progress and checkpoints here.
FileProgress = Callable[[int, int], None]


def scan_corpus(
    root: str | Path, config: ScanConfig | None = None, *, on_file: FileProgress | None = None
) -> ScanResult:
    """Scan and parse every selected file. CPU- and IO-bound: call it from a worker thread."""
    entries: list[ManifestEntry] = []
    documents: list[ParsedDocument] = []
    config = config or ScanConfig()
    base = Path(root)
    paths = select_paths(base, config)
    real_root = base.resolve()
    for done, rel in enumerate(paths, start=1):
        entry, document = _classify(base, real_root, rel, config)
        entries.append(entry)
        if document is not None:
            documents.append(document)
        if on_file is not None:
            on_file(done, len(paths))
    errors = [FileIssue(e.path, e.reason, e.detail) for e in entries if e.status == FileStatus.FAILED]
    warnings = [FileIssue(e.path, *w.partition(": ")[::2]) for e in entries for w in e.warnings]
    return ScanResult(
        manifest=build_manifest(str(root), entries), documents=documents, errors=errors, warnings=warnings
    )


def select_paths(root: str | Path, config: ScanConfig | None = None) -> list[str]:
    """The relative POSIX paths the patterns select under ``root``, sorted; nothing is read."""
    config = config or ScanConfig()
    base = Path(root)
    if not base.is_dir():
        raise RagmeshError(ErrorCode.INVALID_ARGUMENT, "corpus root is not a readable directory")
    selector = PathFilter(config.include, config.exclude)
    return sorted(_selected_paths(base, selector, config.include_hidden))


def iter_corpus(
    root: str | Path, config: ScanConfig | None = None
) -> Iterator[tuple[ManifestEntry, ParsedDocument | None]]:
    """Yield (entry, parsed document or None) per selected file, in path order, one at a time."""
    config = config or ScanConfig()
    base = Path(root)
    paths = select_paths(base, config)
    real_root = base.resolve()
    for rel in paths:
        yield _classify(base, real_root, rel, config)


def build_manifest(root: str, entries: list[ManifestEntry]) -> Manifest:
    ordered = sorted(entries, key=lambda e: e.path)
    digest = sha256_hex(
        "".join(f"{e.path}\x00{e.status}\x00{e.reason}\x00{e.canonical_sha256}\n" for e in ordered)
    )
    return Manifest(root=root, entries=ordered, corpus_sha256=digest)


def require_all_indexable(result: ScanResult) -> None:
    """Raise BUILD_FAILED naming every file that should have been indexable but was not."""
    if not result.errors:
        return
    shown = ", ".join(f"{e.path} ({e.reason})" for e in result.errors[:10])
    more = f" and {len(result.errors) - 10} more" if len(result.errors) > 10 else ""
    raise RagmeshError(
        ErrorCode.BUILD_FAILED,
        f"{len(result.errors)} file(s) should be indexable but yielded no text: {shown}{more}",
        {"files": [msgspec.to_builtins(e) for e in result.errors]},
    )


def _selected_paths(base: Path, selector: PathFilter, include_hidden: bool) -> Iterator[str]:
    for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
        rel_dir = Path(dirpath).relative_to(base).as_posix()
        prefix = "" if rel_dir == "." else f"{rel_dir}/"
        kept: list[str] = []
        linked: list[str] = []
        for name in sorted(dirnames):
            rel = prefix + name
            if name in _VCS_DIRS or selector.prunes(rel) or (name.startswith(".") and not include_hidden):
                continue
            (linked if os.path.islink(os.path.join(dirpath, name)) else kept).append(name)
        dirnames[:] = kept  # os.walk descends into what is left, in sorted order
        # Directory symlinks are reported as entries of their own, never followed.
        names = linked + [n for n in filenames if include_hidden or not n.startswith(".")]
        for rel in sorted(prefix + n for n in names):
            if selector.wants(rel):
                yield rel


def _classify(
    base: Path, real_root: Path, rel: str, config: ScanConfig
) -> tuple[ManifestEntry, ParsedDocument | None]:
    path = base / rel
    parser = parser_for(rel) or ""
    if path.is_symlink():
        try:
            target = path.resolve(strict=True)
        except (OSError, RuntimeError):
            return _archived(rel, ArchiveReason.UNREADABLE, detail="broken or looping symlink"), None
        if not target.is_relative_to(real_root):
            return _archived(rel, ArchiveReason.SYMLINK_OUTSIDE_ROOT), None
        if target.is_dir():
            return _archived(rel, ArchiveReason.SYMLINKED_DIRECTORY), None
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            return _archived(rel, ArchiveReason.SPECIAL_FILE), None
        size = info.st_size
        if size > config.max_file_bytes:
            return _archived(rel, ArchiveReason.TOO_LARGE, size=size, parser=parser), None
        data = path.read_bytes()
    except OSError as exc:
        return _archived(rel, ArchiveReason.UNREADABLE, detail=exc.strerror or type(exc).__name__), None
    raw = sha256_hex(data)
    facts = {"size": len(data), "raw_sha256": raw, "parser": parser}
    if parser != "pdf" and b"\x00" in data[:_SNIFF_BYTES]:
        return _archived(rel, ArchiveReason.BINARY, canonical_sha256=raw, **facts), None
    decoded: str | None = None
    if parser != "pdf":
        try:
            decoded = decode_utf8(data)
        except UnicodeDecodeError as exc:
            reason = ArchiveReason.INVALID_UTF8 if parser else ArchiveReason.BINARY
            return _archived(rel, reason, canonical_sha256=raw, detail=f"byte {exc.start}", **facts), None
    if not parser:
        canonical = canonical_sha256(decoded or "")
        return _archived(rel, ArchiveReason.UNSUPPORTED_FORMAT, canonical_sha256=canonical, **facts), None
    try:
        document = parse_document(rel, parser, data) if decoded is None else parse_text(rel, parser, decoded)
    except Exception as exc:  # noqa: BLE001 - one bad file must not stop a corpus scan
        canonical = raw if decoded is None else canonical_sha256(decoded)
        return _failed(rel, FailureReason.PARSE_ERROR, type(exc).__name__, canonical, **facts), None
    canonical = canonical_sha256(decoded if decoded is not None else document.text)
    if not document.index:
        return _archived(rel, ArchiveReason.INDEX_FALSE, canonical_sha256=canonical, **facts), None
    if not any(section.has_body for section in document.sections):
        return _failed(rel, FailureReason.NO_TEXT, "no text to index", canonical, **facts), None
    entry = ManifestEntry(
        path=rel, status=FileStatus.INDEXED, canonical_sha256=canonical, warnings=document.warnings, **facts
    )
    return entry, document


def _archived(rel: str, reason: ArchiveReason, **fields: object) -> ManifestEntry:
    fields.setdefault("size", 0)
    return ManifestEntry(path=rel, status=FileStatus.ARCHIVED, reason=reason, **fields)  # type: ignore[arg-type]


def _failed(rel: str, reason: FailureReason, detail: str, canonical: str, **facts: object) -> ManifestEntry:
    return ManifestEntry(
        path=rel, status=FileStatus.FAILED, reason=reason, detail=detail, canonical_sha256=canonical, **facts
    )  # type: ignore[arg-type]
