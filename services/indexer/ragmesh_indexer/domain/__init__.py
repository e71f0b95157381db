"""The indexer's pure domain: scanning, parsing, chunking, ids and URLs.

Nothing here touches the network, a database or gRPC; the application service calls these from a
worker thread (they are CPU- and file-bound) and hands the results to its ports.
"""

from .chunking import ChunkingConfig, ChunkingStrategy, chunk_document
from .ids import chunk_id, doc_id, is_uuid_id, parent_id, require_chunk_id
from .model import (
    ArchiveReason,
    Article,
    Block,
    Chunk,
    FailureReason,
    FileIssue,
    FileStatus,
    FileWarning,
    Manifest,
    ManifestEntry,
    Parent,
    ParsedDocument,
    ScanResult,
    Section,
)
from .parsing import parse_document, parse_text, parser_for
from .quotes import QuoteLocator, QuoteMatch, locate_quote, quote_found_at
from .scanning import (
    FileProgress,
    ScanConfig,
    build_manifest,
    iter_corpus,
    require_all_indexable,
    scan_corpus,
    select_paths,
)
from .text import canonical_sha256, canonical_text, sha256_hex
from .urls import PathStyle, SlugRegistry, UrlScheme, github_slug

__all__ = [
    "ArchiveReason", "Article", "Block", "Chunk", "ChunkingConfig", "ChunkingStrategy", "FailureReason",
    "FileIssue", "FileProgress", "FileStatus", "FileWarning", "Manifest", "ManifestEntry", "Parent", "ParsedDocument",
    "PathStyle", "QuoteLocator", "QuoteMatch", "ScanConfig", "ScanResult", "Section", "SlugRegistry",
    "UrlScheme", "build_manifest", "canonical_sha256", "canonical_text", "chunk_document", "chunk_id",
    "doc_id", "github_slug", "is_uuid_id", "iter_corpus", "locate_quote", "parent_id", "parse_document",
    "parse_text", "parser_for", "quote_found_at", "require_all_indexable", "require_chunk_id",
    "scan_corpus", "select_paths", "sha256_hex",
]
