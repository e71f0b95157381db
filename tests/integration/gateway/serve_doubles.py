"""Run the gateway on 127.0.0.1:PORT against the gRPC test doubles, for trying the API by hand.

    .venv/bin/python tests/integration/gateway/serve_doubles.py --port 8080

The doubles serve one public corpus ``docs@1`` with six canned chunks ("quote number N"), so the
outputs in docs/api.md and docs/agents.md can be reproduced without models. Extra gateway settings
come from the environment as usual (e.g. RAGMESH_AUTH_MODE=tokens with RAGMESH_POSTGRES_URL).
Ctrl-C stops it.
"""

from __future__ import annotations

import argparse
import sys

import msgspec
import uvicorn

from gateway_mesh import running_mesh
from ragmesh_common.http_protocol import JsonErrorH11Protocol
from ragmesh_gateway.app import create_app
from ragmesh_gateway.settings import GatewaySettings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=8080)
    args = parser.parse_args()
    with running_mesh() as mesh:
        from_env = msgspec.structs.asdict(GatewaySettings.from_env())
        doubles = msgspec.structs.asdict(mesh.settings())
        for name in ("retrieval_addr", "rerank_addr", "generation_addr", "indexer_addr", "corpora"):
            from_env[name] = doubles[name]
        app = create_app(GatewaySettings(**from_env))
        print(f"gateway on http://127.0.0.1:{args.port} (test doubles downstream)", file=sys.stderr)
        uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", http=JsonErrorH11Protocol)


if __name__ == "__main__":
    main()
