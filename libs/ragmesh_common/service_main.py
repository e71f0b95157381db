"""``python -m ragmesh_<service> [--port N]``: the entry point the rerank and generation services share.

The port overrides the one in RAGMESH_<SERVICE>_ADDR; telemetry is set up before the service is
built and flushed when it stops, however it stops.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any, Callable, Coroutine, TypeVar

from ragmesh_common.heap import freeze_startup_objects
from ragmesh_common.settings import DEFAULT_PORTS
from ragmesh_common.telemetry import setup_telemetry, shutdown_telemetry

S = TypeVar("S")


def run_service(service: str, serve: Callable[[S], Coroutine[Any, Any, None]], settings: Callable[[int | None], S],
                argv: list[str] | None = None) -> None:
    """Parse ``argv``, build the settings for the chosen port and ``serve`` them until the process stops."""
    parser = argparse.ArgumentParser(prog=f"python -m ragmesh_{service}", description=f"ragmesh {service} gRPC service")
    parser.add_argument("--port", type=int, default=None,
                        help=f"gRPC port (default: from RAGMESH_{service.upper()}_ADDR, {DEFAULT_PORTS[service]})")
    args = parser.parse_args(argv)
    setup_telemetry(service)
    chosen = settings(args.port)
    freeze_startup_objects()
    try:
        asyncio.run(serve(chosen))
    finally:
        shutdown_telemetry()
