"""The request id of the CLI's calls to the gateway: a caller's own ``X-Request-ID`` wins over the
one the CLI makes (the e2e trace, OTLP and mesh tests, and `ragmesh up --ask`, follow a chat by the
id they send), and it is sent once, whatever the case of its header name."""

from __future__ import annotations

import json

import pytest

from loopback_server import read_body, serve_in_thread
from ragmesh_cli.gateway_client import stream_answer


class RecordingGateway:
    """A bare ASGI double of the gateway's chat stream: records each request's ``x-request-id``
    headers and answers one ``done`` event, or a 503 error body without a request id."""

    def __init__(self) -> None:
        self.sent: list[list[str]] = []
        self.fail = False

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        await read_body(receive)
        self.sent.append([value.decode() for name, value in scope["headers"] if name == b"x-request-id"])
        if self.fail:
            body = json.dumps({"code": "UNAVAILABLE", "message": "retrieval is unavailable"}).encode()
            await send({"type": "http.response.start", "status": 503,
                        "headers": [(b"content-type", b"application/json")]})
        else:
            body = b'event: done\ndata: {"answer_status": "answered"}\n\n'
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": body})


@pytest.fixture(scope="module")
def gateway():
    app = RecordingGateway()
    with serve_in_thread(app) as url:
        yield app, url


@pytest.mark.parametrize("header", ["X-Request-ID", "x-request-id"])
def test_the_callers_request_id_wins_and_is_sent_once(gateway, header: str) -> None:
    app, url = gateway
    app.fail = True
    result = stream_answer(url, "q", headers={header: "caller-7", "Authorization": "Bearer t"}, timeout=10)
    assert app.sent[-1] == ["caller-7"]
    # The gateway's error body named no request id: the one sent is the one said.
    assert result["terminal"]["event"] == "error" and result["terminal"]["request_id"] == "caller-7"


def test_without_one_the_cli_makes_a_fresh_id_per_request(gateway) -> None:
    app, url = gateway
    app.fail = False
    for _ in range(2):
        result = stream_answer(url, "q", headers={}, timeout=10)
        assert result["terminal"]["event"] == "done"
    first, second = app.sent[-2:]
    assert len(first) == len(second) == 1 and len(first[0]) == 32 and first != second
