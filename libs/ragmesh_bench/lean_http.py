"""A load client whose own cost stays small beside what it measures: HTTP/1.1 keep-alive POSTs of
JSON over asyncio streams, one connection per concurrent caller.

Why the benches need it: httpx spent about 2 ms of CPU per search on this machine (request
building, its transports, h11 on both ends of the exchange), as much as a gRPC hop of the mesh, and
at one client that time is in every latency the bench reports. The clients the gateway serves (nginx,
a browser, a load generator such as wrk) parse HTTP in compiled code. This client writes one request
line and fixed headers, and reads a status line, headers and a ``Content-Length`` or chunked body.

Scope: what the benches ask of a JSON API on 127.0.0.1, nothing more (no TLS, redirects, cookies,
proxies, compression). A response it cannot read (a protocol error, a closed connection) raises
:class:`LeanHttpError`, and its connection is dropped.

A kept-alive connection the server has since closed (uvicorn closes one idle for 5 s) is not an
error: an idle connection whose end has been read is dropped before use, and a request on a reused
connection that is closed before any byte of an answer comes back is sent once more on a new one,
as httpx and urllib3 do. The server may then have seen it twice; a bench's searches allow that.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import msgspec

_ENCODE = msgspec.json.Encoder()


class LeanHttpError(Exception):
    """A response that is not a 2xx, or that could not be read."""

    def __init__(self, message: str, status: int = 0, body: bytes = b"") -> None:
        super().__init__(message)
        self.status = status
        self.body = body


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    def close(self) -> None:
        self.writer.close()


class LeanClient:
    """POST JSON to one origin; keeps idle connections for reuse (at most ``max_idle``)."""

    def __init__(self, base_url: str, *, timeout: float = 60.0, max_idle: int = 64) -> None:
        parts = urlsplit(base_url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"LeanClient speaks plain http to one host; given {base_url!r}")
        self._host = parts.hostname
        self._port = parts.port or 80
        self._prefix = parts.path.rstrip("/")
        self._host_header = parts.netloc.encode()
        self._timeout = timeout
        self._max_idle = max_idle
        self._idle: list[_Connection] = []

    async def post_json(self, path: str, body: Any, headers: dict[str, str] | None = None) -> Any:
        """The decoded JSON of a 2xx answer to ``POST path``; raises LeanHttpError otherwise."""
        payload = _ENCODE.encode(body)
        head = [b"POST ", (self._prefix + path).encode(), b" HTTP/1.1\r\nHost: ", self._host_header,
                b"\r\nContent-Type: application/json\r\nAccept: application/json\r\nContent-Length: ",
                str(len(payload)).encode(), b"\r\n"]
        for name, value in (headers or {}).items():
            head += [name.encode(), b": ", value.encode(), b"\r\n"]
        request = b"".join(head) + b"\r\n" + payload
        status, data = await asyncio.wait_for(self._exchange(request), self._timeout)
        if not 200 <= status < 300:
            raise LeanHttpError(f"POST {path}: HTTP {status}: {data[:300]!r}", status, data)
        return msgspec.json.decode(data)

    async def _exchange(self, request: bytes) -> tuple[int, bytes]:
        connection = self._reusable()
        if connection is not None:
            try:
                return await self._send(connection, request)
            except _Unanswered:
                pass  # closed by the server while idle: once more, on a new connection
        try:
            return await self._send(await self._connect(), request)
        except _Unanswered as exc:
            raise LeanHttpError("connection closed before a response") from exc.__cause__

    def _reusable(self) -> _Connection | None:
        while self._idle:
            connection = self._idle.pop()
            if not connection.reader.at_eof() and not connection.writer.is_closing():
                return connection
            connection.close()
        return None

    async def _send(self, connection: _Connection, request: bytes) -> tuple[int, bytes]:
        try:
            connection.writer.write(request)
            status, body, keep = await _read_response(connection.reader)
        except BaseException:
            connection.close()  # a half-read response leaves the stream unusable
            raise
        if keep and len(self._idle) < self._max_idle:
            self._idle.append(connection)
        else:
            connection.close()
        return status, body

    async def _connect(self) -> _Connection:
        reader, writer = await asyncio.open_connection(self._host, self._port)
        return _Connection(reader, writer)

    async def aclose(self) -> None:
        while self._idle:
            self._idle.pop().close()


@contextlib.asynccontextmanager
async def lean_client(base_url: str, **kwargs: Any) -> AsyncIterator[LeanClient]:
    client = LeanClient(base_url, **kwargs)
    try:
        yield client
    finally:
        await client.aclose()


class _Unanswered(Exception):
    """The connection closed before the first byte of a response."""


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, bytes, bool]:
    """(status, body, whether the connection may be reused)."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if exc.partial:
            raise LeanHttpError("connection closed in the middle of a response") from exc
        raise _Unanswered() from exc
    except ConnectionError as exc:
        raise _Unanswered() from exc
    lines = head[:-4].split(b"\r\n")
    version, _, rest = lines[0].partition(b" ")
    if not version.startswith(b"HTTP/1."):
        raise LeanHttpError(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
    try:
        status = int(rest[:3])
    except ValueError as exc:
        raise LeanHttpError(f"bad status line: {lines[0][:80]!r}") from exc
    fields: dict[bytes, bytes] = {}
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        fields[name.strip().lower()] = value.strip()
    keep = fields.get(b"connection", b"").lower() != b"close" and version == b"HTTP/1.1"
    if b"chunked" in fields.get(b"transfer-encoding", b"").lower():
        return status, await _read_chunked(reader), keep
    length = fields.get(b"content-length")
    if length is None:  # the body runs to the end of the connection
        return status, await reader.read(), False
    return status, await reader.readexactly(int(length)), keep


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts = []
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
        if size == 0:
            await _skip_trailers(reader)
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)


async def _skip_trailers(reader: asyncio.StreamReader) -> None:
    while (await reader.readuntil(b"\r\n")) != b"\r\n":
        pass
