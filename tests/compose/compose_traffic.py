"""Clients of the stack under test, all through nginx: one request with its `degraded` flags, a steady
stream of them in a thread while something breaks, and a keep-alive burst against a rate limit.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import httpx

SEARCH = "/api/rag/v1/search"
CHAT_STREAM = "/api/rag/v1/chat/stream"


@dataclass(frozen=True)
class Answer:
    at: float  # time.monotonic() when the request was sent
    kind: str  # "search" or "chat"
    status: int
    degraded: frozenset[str]
    events: tuple[str, ...] = ()  # chat: SSE event names in order
    code: str = ""  # chat: the error event's code; search: the error body's code


def parse_sse(text: str) -> list[tuple[str, dict]]:
    events = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        name, data = "", []
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
        if name:
            events.append((name, json.loads("\n".join(data)) if data else {}))
    return events


def ask(http: httpx.Client, kind: str, text: str, top_k: int = 3) -> Answer:
    at = time.monotonic()
    if kind == "search":
        response = http.post(SEARCH, json={"query": text, "top_k": top_k})
        body = response.json()
        return Answer(at, kind, response.status_code, frozenset(body.get("degraded", [])), code=body.get("code", ""))
    with http.stream("POST", CHAT_STREAM, json={"question": text, "top_k": top_k}) as response:
        raw = response.read().decode()
    if response.status_code != 200:
        return Answer(at, kind, response.status_code, frozenset(), code=json.loads(raw).get("code", ""))
    events = parse_sse(raw)
    flags: set[str] = set()
    code = ""
    for name, data in events:
        if name in ("meta", "done", "error"):
            flags |= set(data.get("degraded") or [])
        if name == "error":
            code = data.get("code", "")
    return Answer(at, kind, 200, frozenset(flags), tuple(name for name, _ in events), code)


@dataclass
class Traffic:
    """Requests through nginx in a background thread, one after another, each kind at its pace."""

    base_url: str
    token: str
    question: str  # each request asks it with its own number appended: no cache answers for a service
    paces: dict[str, float]  # kind -> seconds between two requests of that kind
    answers: list[Answer] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def __enter__(self) -> Traffic:
        self._rush: dict[str, int] = {}
        self._rush_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=120)

    def _run(self) -> None:
        due = {kind: time.monotonic() for kind in self.paces}
        headers = {"Authorization": f"Bearer {self.token}"}
        with httpx.Client(base_url=self.base_url, headers=headers, timeout=120) as http:
            while not self._stop.is_set():
                rushed = self._rushed()
                kind = rushed or min(due, key=due.get)
                wait = 0.0 if rushed else due[kind] - time.monotonic()
                if wait > 0 and self._stop.wait(wait):
                    return
                due[kind] = time.monotonic() + self.paces[kind]
                try:
                    self.answers.append(ask(http, kind, f"{self.question} (question {len(self.answers)})"))
                except (httpx.HTTPError, ValueError) as exc:  # no answer at all is a finding too
                    self.failures.append(f"{kind}: {type(exc).__name__}: {exc}")

    def rush(self, kind: str, times: int) -> None:
        """Send ``times`` requests of ``kind`` back to back, starting with the next one: a crashed
        service is down for a second or two only, less than a chat's pace (its rate limit)."""
        with self._rush_lock:
            self._rush[kind] = times

    def _rushed(self) -> str | None:
        with self._rush_lock:
            kind = next((k for k, n in self._rush.items() if n > 0), None)
            if kind is not None:
                self._rush[kind] -= 1
        return kind

    def since(self, moment: float) -> list[Answer]:
        return [answer for answer in list(self.answers) if answer.at >= moment]


async def burst(base_url: str, path: str, token: str, *, seconds: float, connections: int,
                request_id_prefix: str, per_connection_rps: float | None = None) -> dict[int, int]:
    """Keep-alive GETs through nginx from ``connections`` connections for ``seconds``: count per status.

    Plain HTTP/1.1 over asyncio streams: a full HTTP client costs more CPU per request than nginx and
    the gateway do, and on a small machine the load generator would set the pace. Each request
    carries an X-Request-ID with the prefix, so nginx's access log tells which replica served it.
    ``per_connection_rps`` caps each connection's pace: unpaced, a quiet machine sent 48,000 requests
    in 10 s, and their access-log lines outgrew the json-file log (3 x 10 MB) the test reads them from.
    """
    host, port = urlsplit(base_url).hostname, urlsplit(base_url).port
    counts: dict[int, int] = {}
    streams = [await asyncio.open_connection(host, port) for _ in range(connections)]
    end_at = time.monotonic() + seconds
    sequence = iter(range(10**9))

    async def run(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        next_at = time.monotonic()
        while time.monotonic() < end_at:
            if per_connection_rps:
                await asyncio.sleep(max(0.0, next_at - time.monotonic()))
                next_at += 1 / per_connection_rps
            writer.write(
                f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {token}\r\n"
                f"X-Request-ID: {request_id_prefix}{next(sequence)}\r\n\r\n".encode()
            )
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError):
                # nginx ends a keep-alive connection after keepalive_requests (1000): open another.
                writer.close()
                reader, writer = await asyncio.open_connection(host, port)
                continue
            status = int(head.split(b" ", 2)[1])
            fields = dict(line.split(b":", 1) for line in head.split(b"\r\n")[1:] if b":" in line)
            fields = {name.strip().lower(): value.strip() for name, value in fields.items()}
            await reader.readexactly(int(fields[b"content-length"]))
            counts[status] = counts.get(status, 0) + 1
            if fields.get(b"connection", b"").lower() == b"close":
                writer.close()
                reader, writer = await asyncio.open_connection(host, port)
        writer.close()

    await asyncio.gather(*(run(reader, writer) for reader, writer in streams))
    return counts
