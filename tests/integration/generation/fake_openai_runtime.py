"""A scripted OpenAI-compatible runtime (SSE chat completions) served in a thread by tests/loopback_server.py.

Test double for what the real CPU runtime cannot easily do on demand: answer slowly, stall,
send garbage, and report whether the client hung up.
"""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import dataclass, field
from typing import Any

from loopback_server import read_body

MODEL = "fake-llm"


@dataclass
class Script:
    pieces: list[str] = field(default_factory=list)
    delay_s: float = 0.0  # between pieces
    mode: str = "answer"  # answer | stall | garbage | error500 | endless (never finishes)
    context: int | None = None  # max_model_len on /v1/models (as vLLM says it)


class FakeOpenAiRuntime:
    def __init__(self) -> None:
        self.script = Script()
        self.requests: list[dict[str, Any]] = []
        self.disconnected = threading.Event()
        self.completed = threading.Event()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (message := await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        body = await read_body(receive)
        if scope["path"] == "/v1/models":
            card = {"id": MODEL, "object": "model", "created": 0, "owned_by": "test"}
            if self.script.context:
                card["max_model_len"] = self.script.context
            await _json(send, {"object": "list", "data": [card]})
            return
        if scope["path"] == "/tokenize":  # no tokenizer here: the service must estimate
            await _json(send, {"detail": "Not Found"}, status=404)
            return
        self.requests.append(json.loads(body))
        script = self.script
        if script.mode == "error500":
            await _json(send, {"error": {"message": "boom"}}, status=500)
            return
        hung_up = asyncio.Event()

        async def watch() -> None:
            if (await receive())["type"] == "http.disconnect":
                self.disconnected.set()
                hung_up.set()

        watcher = asyncio.create_task(watch())
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream")]})
        try:
            if script.mode == "garbage":
                await _chunk(send, b"data: this is not json\n\n")
            for piece in script.pieces:
                await _chunk(send, _event({"content": piece}, None))
                if script.delay_s:
                    await asyncio.wait([watcher], timeout=script.delay_s)
                if hung_up.is_set():
                    return
            while script.mode == "endless" and not hung_up.is_set():
                await _chunk(send, _event({"content": "and so on "}, None))
                await asyncio.sleep(0)
            if script.mode in ("stall", "endless"):
                await asyncio.wait([watcher], timeout=60)
                return
            await _chunk(send, _event({}, "stop"))
            await _chunk(send, b"data: [DONE]\n\n")
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            self.completed.set()
        finally:
            watcher.cancel()


def _event(delta: dict[str, str], finish_reason: str | None) -> bytes:
    chunk = {"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 0, "model": MODEL,
             "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


async def _chunk(send: Any, data: bytes) -> None:
    await send({"type": "http.response.body", "body": data, "more_body": True})


async def _json(send: Any, content: Any, status: int = 200) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": json.dumps(content).encode()})
