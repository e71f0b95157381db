"""Container health checks without extra binaries.

    python -m ragmesh_common.healthcheck grpc 127.0.0.1:50051
    python -m ragmesh_common.healthcheck http http://127.0.0.1:8080/health/live
"""

from __future__ import annotations

import sys
import urllib.request


def check_grpc(target: str, timeout: float = 3.0) -> bool:
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with grpc.insecure_channel(target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        reply = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=timeout)
        return reply.status == health_pb2.HealthCheckResponse.SERVING


def check_http(url: str, timeout: float = 3.0) -> bool:
    with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 - loopback URL from config
        return 200 <= resp.status < 300


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in {"grpc", "http"}:
        print("usage: python -m ragmesh_common.healthcheck grpc HOST:PORT | http URL", file=sys.stderr)
        return 2
    try:
        ok = check_grpc(argv[1]) if argv[0] == "grpc" else check_http(argv[1])
    except Exception as exc:  # any failure means unhealthy
        print(f"unhealthy: {type(exc).__name__}", file=sys.stderr)
        return 1
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
