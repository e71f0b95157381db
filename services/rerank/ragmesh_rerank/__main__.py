"""python -m ragmesh_rerank [--port 50052]"""

from __future__ import annotations

import argparse
import asyncio

from ragmesh_common.telemetry import setup_telemetry, shutdown_telemetry

from ragmesh_rerank.app import serve
from ragmesh_rerank.settings import RerankSettings


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m ragmesh_rerank", description="ragmesh rerank gRPC service")
    parser.add_argument("--port", type=int, default=None, help="gRPC port (default: from RAGMESH_RERANK_ADDR, 50052)")
    args = parser.parse_args(argv)
    setup_telemetry("rerank")
    try:
        asyncio.run(serve(RerankSettings.from_env(port=args.port)))
    finally:
        shutdown_telemetry()


if __name__ == "__main__":
    main()
