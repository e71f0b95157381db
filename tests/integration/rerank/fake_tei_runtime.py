"""A TEI-compatible /info + /rerank double served in a thread by tests/loopback_server.py.

Scores a text by how many query words it contains, like a (very) poor reranker, and can be told
to answer slowly so deadlines can be tested.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from loopback_server import read_body

INFO = {"model_id": "fake/cross-encoder", "model_type": {"reranker": {"id2label": {"0": "LABEL_0"}}},
        "max_input_length": 512}


class FakeTeiRuntime:
    def __init__(self) -> None:
        self.delay_s = 0.0
        self.bodies: list[dict[str, Any]] = []

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        body = await read_body(receive)
        if scope["path"] == "/info":
            return await _json(send, INFO)
        if scope["path"] != "/rerank":
            return await _json(send, {"error": "not found"}, 404)
        request = json.loads(body)
        self.bodies.append(request)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        words = set(request["query"].lower().split())
        scores = [len(words & set(text.lower().split())) / (len(words) or 1) for text in request["texts"]]
        order = sorted(range(len(scores)), key=lambda i: -scores[i])
        await _json(send, [{"index": i, "score": scores[i]} for i in order])


async def _json(send: Any, content: Any, status: int = 200) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": json.dumps(content).encode()})
