"""SessionMemory in Redis (redis.asyncio): turns per session with a TTL and caps on count and bytes.

Layout, per session (``digest`` = sha256 of the id, so a Redis dump holds no usable id; the braces
are a Redis Cluster hash tag keeping both keys in one slot for the script):

- ``{prefix}:{digest}:owner`` — the owner key (a digest of the caller); exists from ``create``;
- ``{prefix}:{digest}:turns`` — a list of JSON turns ``{"role", "content", "headings"}``.

Both keys expire ``ttl_s`` after the last write (sliding). One Lua script appends atomically: it
checks the owner, pushes, trims to the newest ``max_turns``, then drops the oldest turns while the
list holds more than ``max_bytes`` (the newest turn always stays). Each turn's content is cut to
``max_turn_chars`` before it is stored, so one huge answer cannot evict the whole conversation.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from redis.exceptions import RedisError

from ragmesh_common.errors import ErrorCode, RagmeshError

from ragmesh_gateway.sessions.ids import new_session_id, storage_key
from ragmesh_gateway.sessions.ports import SessionMemory, Turn, unknown_session

if TYPE_CHECKING:
    from redis.asyncio import Redis

log = logging.getLogger("ragmesh.gateway.sessions")

# KEYS[1] owner, KEYS[2] turns; ARGV: owner, ttl_ms, max_turns, max_bytes, turn...
# Returns the number of turns kept, 0 when the session is gone, -1 when it is someone else's.
APPEND_LUA = """
local owner = redis.call('GET', KEYS[1])
if not owner then return 0 end
if owner ~= ARGV[1] then return -1 end
for i = 5, #ARGV do redis.call('RPUSH', KEYS[2], ARGV[i]) end
redis.call('LTRIM', KEYS[2], -tonumber(ARGV[3]), -1)
local items = redis.call('LRANGE', KEYS[2], 0, -1)
local total = 0
for i = 1, #items do total = total + string.len(items[i]) end
local dropped = 0
while total > tonumber(ARGV[4]) and dropped < #items - 1 do
  dropped = dropped + 1
  total = total - string.len(items[dropped])
  redis.call('LPOP', KEYS[2])
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return #items - dropped
"""


class RedisSessionMemory(SessionMemory):
    def __init__(
        self,
        redis: Redis,
        *,
        ttl_s: float = 1800.0,
        max_turns: int = 20,
        max_bytes: int = 32 * 1024,
        max_turn_chars: int = 4000,
        key_prefix: str = "ragmesh:session",
        timeout_s: float = 1.0,
    ) -> None:
        if ttl_s <= 0 or max_turns < 1 or max_bytes < 1 or max_turn_chars < 1:
            raise ValueError("session memory needs ttl_s > 0 and positive caps")
        self._redis = redis
        self._ttl_ms = int(ttl_s * 1000)
        self._max_turns = max_turns
        self._max_bytes = max_bytes
        self._max_turn_chars = max_turn_chars
        self._prefix = key_prefix
        # redis-py retries for seconds by default; a chat request must not wait that long for memory.
        self._timeout_s = timeout_s
        self._append = redis.register_script(APPEND_LUA)

    def _keys(self, session_id: str) -> tuple[str, str]:
        base = f"{self._prefix}:{{{storage_key(session_id)}}}"
        return f"{base}:owner", f"{base}:turns"

    async def create(self, owner: str) -> str | None:
        async with self._store("create"):
            while True:
                session_id = new_session_id()
                owner_key, _ = self._keys(session_id)
                # NX: a (192-bit) collision is never overwritten, however unlikely.
                if await self._redis.set(owner_key, owner, nx=True, px=self._ttl_ms):
                    return session_id

    async def history(self, session_id: str, owner: str) -> list[Turn]:
        owner_key, turns_key = self._keys(session_id)
        async with self._store("read"):
            async with self._redis.pipeline(transaction=True) as pipe:
                stored_owner, items = await pipe.get(owner_key).lrange(turns_key, 0, -1).execute()
        if stored_owner is None or _text(stored_owner) != owner:
            raise unknown_session()
        return [turn for turn in map(_decode_turn, items) if turn is not None]

    async def remember(self, session_id: str, owner: str, turns: list[Turn]) -> None:
        if not turns:
            return
        owner_key, turns_key = self._keys(session_id)
        encoded = [_encode_turn(t, self._max_turn_chars) for t in turns]
        async with self._store("write"):
            kept = await self._append(
                keys=[owner_key, turns_key],
                args=[owner, self._ttl_ms, self._max_turns, self._max_bytes, *encoded],
            )
        if int(kept) <= 0:
            # Expired while the answer streamed (or not this caller's): the turns are dropped and
            # the next request with this id gets NOT_FOUND, which tells the client to start over.
            reason = "gone" if int(kept) == 0 else "owner"
            log.info("session turns dropped", extra={"fields": {"reason": reason}})

    @contextlib.asynccontextmanager
    async def _store(self, operation: str) -> AsyncIterator[None]:
        """Bounds a Redis call in time; failures become UNAVAILABLE (messages name no data)."""
        try:
            async with asyncio.timeout(self._timeout_s):
                yield
        except TimeoutError:
            raise RagmeshError(ErrorCode.UNAVAILABLE, f"session memory {operation}: timed out") from None
        except (RedisError, OSError) as exc:
            raise RagmeshError(ErrorCode.UNAVAILABLE,
                               f"session memory {operation}: {type(exc).__name__}") from exc


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _encode_turn(turn: Turn, max_chars: int) -> str:
    body = {"role": turn.role, "content": turn.content[:max_chars]}
    if turn.cited_headings:
        body["headings"] = [h[:200] for h in turn.cited_headings[:8]]
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


def _decode_turn(item: bytes | str) -> Turn | None:
    """A stored turn, or None for anything unreadable (never fails the whole history)."""
    try:
        body = json.loads(_text(item))
        role, content = body["role"], body["content"]
        headings = tuple(h for h in body.get("headings", ()) if isinstance(h, str))
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    if role not in ("user", "assistant") or not isinstance(content, str):
        return None
    return Turn(role, content, headings)
