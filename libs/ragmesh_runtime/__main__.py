"""``python -m ragmesh_runtime [--host H] [--port P]``: serve the runtime with uvicorn.

uvicorn owns the signals: SIGTERM/SIGINT stop accepting, let in-flight requests finish (up to
the grace period), then run the app's shutdown hooks, which stop the inference thread.
"""

from __future__ import annotations

import argparse
import sys

import msgspec

from ragmesh_common.telemetry import setup_telemetry, shutdown_telemetry
from ragmesh_runtime.settings import load_settings


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    server = load_settings().server
    parser = argparse.ArgumentParser(
        prog="python -m ragmesh_runtime",
        description="CPU model runtime serving TEI (/embed, /rerank) and OpenAI (/v1) HTTP APIs.",
    )
    parser.add_argument("--host", default=server.host, help="bind address (RAGMESH_RUNTIME_HOST)")
    parser.add_argument("--port", type=int, default=server.port, help="port (RAGMESH_RUNTIME_PORT)")
    parser.add_argument("--log-level", default=server.log_level, help="RAGMESH_LOG_LEVEL")
    parser.add_argument("--graceful-seconds", type=float, default=10.0, help="drain time on SIGTERM")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    setup_telemetry("runtime", level=args.log_level)
    settings = load_settings()
    server = msgspec.structs.replace(
        settings.server, host=args.host, port=args.port, log_level=args.log_level
    )
    settings = msgspec.structs.replace(settings, server=server)

    import uvicorn

    from ragmesh_common.heap import freeze_startup_objects
    from ragmesh_common.http_protocol import JsonErrorH11Protocol
    from ragmesh_runtime.app import create_app

    try:
        app = create_app(settings)
        freeze_startup_objects(app.state.runtime_metrics.registry)
        uvicorn.run(
            app,
            host=args.host,
            port=args.port,
            log_level=args.log_level,
            log_config=None,  # keep the JSON log lines set up above
            access_log=False,  # requests are counted in /metrics instead
            timeout_graceful_shutdown=args.graceful_seconds,
            http=JsonErrorH11Protocol,
        )
    finally:
        shutdown_telemetry()
    return 0


if __name__ == "__main__":
    sys.exit(main())
