"""python -m ragmesh_generation [--port 50053]"""

from __future__ import annotations

import argparse
import asyncio

from ragmesh_common.telemetry import setup_telemetry, shutdown_telemetry

from ragmesh_generation.app import serve
from ragmesh_generation.settings import GenerationSettings


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m ragmesh_generation",
                                     description="ragmesh generation gRPC service")
    parser.add_argument("--port", type=int, default=None,
                        help="gRPC port (default: from RAGMESH_GENERATION_ADDR, 50053)")
    args = parser.parse_args(argv)
    setup_telemetry("generation")
    try:
        asyncio.run(serve(GenerationSettings.from_env(port=args.port)))
    finally:
        shutdown_telemetry()


if __name__ == "__main__":
    main()
