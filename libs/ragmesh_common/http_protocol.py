"""uvicorn's HTTP/1.1 protocol with the one answer it writes itself in the error shape.

A request h11 cannot parse (a bad Content-Length, a TLS handshake on the plain port) never reaches
the ASGI app: uvicorn answers ``400 Invalid HTTP request received.`` as text/plain. Every error of
ragmesh is JSON with a stable ``code``, so the gateway and the runtime run uvicorn with
``http=JsonErrorH11Protocol``.
"""

from __future__ import annotations

import json

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from ragmesh_common.errors import ErrorCode, RagmeshError


def malformed_request_body() -> bytes:
    error = RagmeshError(ErrorCode.MALFORMED_REQUEST, "invalid HTTP request")
    return json.dumps(error.to_body(), separators=(",", ":")).encode("ascii")


class JsonErrorH11Protocol(H11Protocol):
    def send_400_response(self, msg: str) -> None:  # noqa: ARG002 - uvicorn's text is replaced
        body = malformed_request_body()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                   (b"connection", b"close")]
        for event in (h11.Response(status_code=400, headers=headers, reason=b"Bad Request"),
                      h11.Data(data=body), h11.EndOfMessage()):
            self.transport.write(self.conn.send(event))
        self.transport.close()
