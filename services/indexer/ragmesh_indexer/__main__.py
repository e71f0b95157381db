"""python -m ragmesh_indexer [--port N]"""

from __future__ import annotations

import argparse
import asyncio

from ragmesh_common.heap import freeze_startup_objects

from ragmesh_indexer.app import serve
from ragmesh_indexer.settings import IndexerSettings


def main() -> None:
    parser = argparse.ArgumentParser(prog="ragmesh_indexer")
    parser.add_argument("--port", type=int, default=None)
    args = parser.parse_args()
    settings = IndexerSettings.from_env(port=args.port)
    freeze_startup_objects()
    asyncio.run(serve(settings))


if __name__ == "__main__":
    main()
