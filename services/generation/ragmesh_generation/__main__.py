"""python -m ragmesh_generation [--port 50053]"""

from __future__ import annotations

from ragmesh_common.service_main import run_service

from ragmesh_generation.app import serve
from ragmesh_generation.settings import GenerationSettings


def main(argv: list[str] | None = None) -> None:
    run_service("generation", serve, lambda port: GenerationSettings.from_env(port=port), argv)


if __name__ == "__main__":
    main()
