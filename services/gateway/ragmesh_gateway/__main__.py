"""``python -m ragmesh_gateway [--host 127.0.0.1] [--port 8080]``: the gateway under uvicorn."""

from __future__ import annotations

import argparse
import logging

import uvicorn

from ragmesh_common.heap import freeze_startup_objects
from ragmesh_common.http_protocol import JsonErrorH11Protocol
from ragmesh_common.settings import describe
from ragmesh_common.telemetry import setup_telemetry, shutdown_telemetry

from ragmesh_gateway.app import create_app
from ragmesh_gateway.settings import get_settings

log = logging.getLogger("ragmesh.gateway")


def main(argv: list[str] | None = None) -> None:
    settings = get_settings()
    parser = argparse.ArgumentParser(prog="python -m ragmesh_gateway", description="ragmesh HTTP/MCP gateway")
    parser.add_argument("--host", default=settings.host)
    parser.add_argument("--port", type=int, default=settings.port)
    args = parser.parse_args(argv)

    setup_telemetry("gateway")
    log.info(
        "starting", extra={"fields": {"settings": describe(settings), "host": args.host, "port": args.port}}
    )
    app = create_app(settings)
    freeze_startup_objects()
    try:
        uvicorn.run(
            app,
            host=args.host,
            port=args.port,
            log_config=None,  # keep the JSON log format set up above
            access_log=False,  # the request-context layer logs each request once
            proxy_headers=False,
            http=JsonErrorH11Protocol,  # uvicorn's own 400 in the error shape too
            timeout_graceful_shutdown=10,
        )
    finally:
        shutdown_telemetry()


if __name__ == "__main__":
    main()
