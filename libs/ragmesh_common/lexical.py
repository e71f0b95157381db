"""BM25 sparse vectors for Qdrant's IDF modifier, shared by the indexer and retrieval.

Qdrant computes IDF itself (``modifier=IDF`` on the sparse vector), so a document vector holds
only BM25's saturated term frequency, ``tf*(k1+1) / (tf + k1*(1-b+b*len/avg_len))``, and a query
vector holds 1.0 per unique term. Tokens: NFKC + case folding, Latin-script words stemmed with
Snowball, Han runs segmented by jieba (rjieba), stopwords dropped; each token is hashed to a
uint32 index (blake2b, 4 bytes) — rare collisions merely merge two terms.

Both sides must tokenize identically: :attr:`LexicalEncoder.version` names the tokenizer revision,
the config and the library versions, and is stored with every collection so that retrieval can
refuse (or rebuild) an index built with a different tokenizer.
"""

from __future__ import annotations

import hashlib
import re
import threading
import unicodedata
from collections import Counter
from importlib import metadata
from typing import Any

import msgspec
import rjieba
import snowballstemmer

from .errors import ErrorCode, RagmeshError

# Bump whenever tokens() would return something different for the same text and config.
TOKENIZER_REVISION = 1

_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f"
_TOKEN = re.compile(rf"(?P<han>[{_HAN}]+)|(?P<word>[^\W_{_HAN}]+)")

ENGLISH_STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had
    has have having he her here hers herself him himself his how i if in into is it its itself just
    me more most my myself no nor not of off on once only or other our ours ourselves out over own
    same she should so some such than that the their theirs them themselves then there these they
    this those through to too under until up very was we were what when where which while who whom
    why will with would you your yours yourself yourselves""".split()
)
CHINESE_STOPWORDS = frozenset(
    """的 了 和 是 在 也 与 及 或 而 就 都 这 那 之 其 为 以 于 个 着 把 被 将 对 从 等 我 你 他 她 它
    们 我们 你们 他们 这个 那个 一个 吗 呢 吧 啊 并 且 但 所 则""".split()
)
_STOPWORD_SETS = {"english": ENGLISH_STOPWORDS, "chinese": CHINESE_STOPWORDS}
_CACHE_LIMIT = 500_000


class LexicalConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    language: str = "english"  # Snowball algorithm for Latin-script words
    stemming: bool = True
    stopwords: tuple[str, ...] = ("english", "chinese")  # names of built-in lists
    cjk_mode: str = "search"  # "search": jieba's search mode (北京大学 -> 北京, 大学, 北京大学); "precise"
    k1: float = 1.2
    b: float = 0.75
    max_token_chars: int = 40  # longer "words" are hashes or base64, not vocabulary

    def __post_init__(self) -> None:
        if self.language not in snowballstemmer.algorithms():
            raise RagmeshError(ErrorCode.INVALID_ARGUMENT, "lexical language is not a Snowball algorithm")
        if unknown := set(self.stopwords) - _STOPWORD_SETS.keys():
            raise RagmeshError(ErrorCode.INVALID_ARGUMENT, f"unknown stopword lists: {sorted(unknown)}")
        if self.cjk_mode not in ("search", "precise"):
            raise RagmeshError(ErrorCode.INVALID_ARGUMENT, "lexical cjk_mode must be search or precise")
        if self.k1 < 0 or not 0 <= self.b <= 1:
            raise RagmeshError(ErrorCode.INVALID_ARGUMENT, "BM25 needs k1 >= 0 and 0 <= b <= 1")


class SparseVector(msgspec.Struct, frozen=True):
    indices: list[int]  # ascending, unique uint32
    values: list[float]


class LexicalEncoder:
    """Deterministic, thread-safe BM25 encoder. CPU-bound: call it off the event loop."""

    def __init__(self, config: LexicalConfig | None = None) -> None:
        self.config = config or LexicalConfig()
        self._stopwords = frozenset().union(*(_STOPWORD_SETS[name] for name in self.config.stopwords))
        self._cut = rjieba.cut_for_search if self.config.cjk_mode == "search" else rjieba.cut
        self._local = threading.local()  # Snowball stemmers keep state while stemming
        self._stems: dict[str, str] = {}
        self._indices: dict[str, int] = {}
        self.version = _version(self.config)

    @classmethod
    def from_dict(cls, config: dict[str, Any]) -> LexicalEncoder:
        """Rebuild the encoder a collection was built with (``CollectionMeta.lexical_config``)."""
        try:
            return cls(msgspec.convert(config, LexicalConfig))
        except msgspec.ValidationError as exc:
            raise RagmeshError(ErrorCode.INVALID_ARGUMENT, f"invalid lexical config: {exc}") from exc

    def config_dict(self) -> dict[str, Any]:
        return msgspec.to_builtins(self.config)

    def tokens(self, text: str) -> list[str]:
        out: list[str] = []
        stopwords = self._stopwords
        folded = unicodedata.normalize("NFKC", text).casefold()
        for match in _TOKEN.finditer(folded):
            word = match.group("word")
            if word is not None:
                if word not in stopwords and len(word) <= self.config.max_token_chars:
                    out.append(self._stem(word))
                continue
            for piece in self._cut(match.group("han")):
                if piece not in stopwords:
                    out.append(piece)
        return out

    def term_ids(self, text: str) -> list[int]:
        """The text's tokens as the sparse vector's term indices, in order, repeats kept."""
        return [self._index(t) for t in self.tokens(text)]

    def token_count(self, text: str) -> int:
        """A document's length in tokens; the mean over a corpus is ``avg_len``."""
        return len(self.tokens(text))

    def encode_document(self, text: str, avg_len: float) -> SparseVector:
        return self._from_tokens(self.tokens(text), avg_len)

    def encode_query(self, text: str) -> SparseVector:
        indices = sorted({self._index(t) for t in self.tokens(text)})
        return SparseVector(indices, [1.0] * len(indices))

    def encode_documents(self, texts: list[str]) -> tuple[list[SparseVector], float]:
        """Encode a whole batch with its own mean length (tokenizing each text once)."""
        token_lists = [self.tokens(t) for t in texts]
        avg_len = sum(map(len, token_lists)) / len(token_lists) if token_lists else 0.0
        return [self._from_tokens(tokens, avg_len) for tokens in token_lists], avg_len

    def _from_tokens(self, tokens: list[str], avg_len: float) -> SparseVector:
        counts = Counter(self._index(t) for t in tokens)
        length = len(tokens)
        if not length:
            return SparseVector([], [])
        k1, b = self.config.k1, self.config.b
        norm = k1 * (1 - b + b * length / avg_len) if avg_len > 0 else k1
        indices = sorted(counts)
        return SparseVector(indices, [counts[i] * (k1 + 1) / (counts[i] + norm) for i in indices])

    def _stem(self, word: str) -> str:
        if not self.config.stemming:
            return word
        stem = self._stems.get(word)
        if stem is None:
            stemmer = getattr(self._local, "stemmer", None)
            if stemmer is None:
                stemmer = self._local.stemmer = snowballstemmer.stemmer(self.config.language)
            stem = stemmer.stemWord(word)
            if len(self._stems) >= _CACHE_LIMIT:
                self._stems.clear()
            self._stems[word] = stem
        return stem

    def _index(self, token: str) -> int:
        index = self._indices.get(token)
        if index is None:
            index = token_index(token)
            if len(self._indices) >= _CACHE_LIMIT:
                self._indices.clear()
            self._indices[token] = index
        return index


def token_index(token: str) -> int:
    """Stable across processes and Python versions (unlike ``hash``)."""
    return int.from_bytes(hashlib.blake2b(token.encode("utf-8"), digest_size=4).digest(), "little")


def _version(config: LexicalConfig) -> str:
    libraries = {name: _package_version(name) for name in ("snowballstemmer", "rjieba")}
    fingerprint = msgspec.json.encode({"config": config, "libraries": libraries, "unicode": unicodedata.unidata_version})
    return f"bm25-r{TOKENIZER_REVISION}-{hashlib.sha256(fingerprint).hexdigest()[:12]}"


def _package_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "unknown"
