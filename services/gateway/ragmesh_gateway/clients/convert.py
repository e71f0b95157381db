"""protobuf <-> gateway domain types; the only place that knows both.

Conversions go by field name: a domain dataclass declares its fields once and ``record_from`` /
``message_from`` copy the protobuf fields of the same names (a chunk's one declaration is
``ragmesh_common.chunk_record``). Only what changes form on the way is written out, as ``given``.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, TypeVar

from google.protobuf.message import Message
from ragmesh.v1 import common_pb2

from ragmesh_common.chunk_record import Chunk, chunk_from_message, chunk_values

from ragmesh_gateway.search.models import Filters, ScoredChunk


R = TypeVar("R")
M = TypeVar("M", bound=Message)


@functools.cache
def _plan(record_type: type, descriptor: Any) -> tuple[tuple[str, bool | None], ...]:
    """(name, repeated) of the record's fields as the message declares them, None where it does not
    declare one; read once per pair."""
    fields = descriptor.fields_by_name
    return tuple((f.name, fields[f.name].is_repeated if f.name in fields else None)
                 for f in dataclasses.fields(record_type))


def _values(plan: tuple[tuple[str, bool | None], ...], source: Any, given: dict[str, Any]) -> dict[str, Any]:
    values = {}
    for name, repeated in plan:
        if name in given:
            continue
        if repeated is None:
            raise TypeError(f"{name} has no protobuf field of that name: pass it as given")
        values[name] = list(getattr(source, name)) if repeated else getattr(source, name)
    return values


def record_from(record_type: type[R], message: Message, **given: Any) -> R:
    """The dataclass from the message's fields of the same names (repeated ones as lists);
    ``given`` for the fields that change form (nested messages, defaults for empty strings)."""
    return record_type(**_values(_plan(record_type, message.DESCRIPTOR), message, given), **given)


def message_from(message_type: type[M], record: Any, **given: Any) -> M:
    """The message from the dataclass's fields of the same names; ``given`` for the rest."""
    return message_type(**_values(_plan(type(record), message_type.DESCRIPTOR), record, given), **given)


# Which Chunk fields are repeated, as the descriptor says; read once.
_REPEATED = frozenset(f.name for f in common_pb2.Chunk.DESCRIPTOR.fields if f.is_repeated)


def chunk_from_pb(pb: common_pb2.Chunk) -> Chunk:
    return chunk_from_message(pb, _REPEATED)


def chunk_to_pb(chunk: Chunk) -> common_pb2.Chunk:
    return common_pb2.Chunk(**chunk_values(chunk))


def scored_from_pb(pb: common_pb2.ScoredChunk) -> ScoredChunk:
    return ScoredChunk(chunk=chunk_from_pb(pb.chunk), scores=dict(pb.scores))


def filters_to_pb(filters: Filters) -> common_pb2.SearchFilters:
    return message_from(common_pb2.SearchFilters, filters)
