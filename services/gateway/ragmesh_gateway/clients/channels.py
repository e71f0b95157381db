"""One gRPC channel per downstream service, opened lazily and closed at shutdown."""

from __future__ import annotations

import grpc

from ragmesh_common.rpc.client import open_channel


class Channels:
    def __init__(self, targets: dict[str, str]) -> None:
        self._targets = dict(targets)
        self._open: dict[str, grpc.aio.Channel] = {}

    def target(self, peer: str) -> str:
        return self._targets[peer]

    def get(self, peer: str) -> grpc.aio.Channel:
        # Opened on first use: grpc.aio channels bind to the running event loop.
        if peer not in self._open:
            self._open[peer] = open_channel(self._targets[peer])
        return self._open[peer]

    async def close(self) -> None:
        channels, self._open = list(self._open.values()), {}
        for channel in channels:
            await channel.close(grace=None)
