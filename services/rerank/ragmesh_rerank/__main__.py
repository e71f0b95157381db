"""python -m ragmesh_rerank [--port 50052]"""

from __future__ import annotations

from ragmesh_common.service_main import run_service

from ragmesh_rerank.app import serve
from ragmesh_rerank.settings import RerankSettings


def main(argv: list[str] | None = None) -> None:
    run_service("rerank", serve, lambda port: RerankSettings.from_env(port=port), argv)


if __name__ == "__main__":
    main()
