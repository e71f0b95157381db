"""python -m ragmesh_retrieval [--host 127.0.0.1] [--port 50051]"""

from __future__ import annotations

import argparse
import asyncio

from ragmesh_retrieval.app import serve
from ragmesh_retrieval.settings import load_settings


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m ragmesh_retrieval", description="ragmesh retrieval service")
    parser.add_argument("--host", help="bind address (default from RAGMESH_RETRIEVAL_ADDR, 127.0.0.1)")
    parser.add_argument("--port", type=int, help="gRPC port (default from RAGMESH_RETRIEVAL_ADDR, 50051)")
    args = parser.parse_args(argv)
    asyncio.run(serve(load_settings(port=args.port, host=args.host)))


if __name__ == "__main__":
    main()
