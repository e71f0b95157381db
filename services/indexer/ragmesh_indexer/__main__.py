"""python -m ragmesh_indexer [--port N]"""

from __future__ import annotations

import argparse
import asyncio

from ragmesh_indexer.app import serve
from ragmesh_indexer.settings import IndexerSettings


def main() -> None:
    parser = argparse.ArgumentParser(prog="ragmesh_indexer")
    parser.add_argument("--port", type=int, default=None)
    args = parser.parse_args()
    asyncio.run(serve(IndexerSettings.from_env(port=args.port)))


if __name__ == "__main__":
    main()
