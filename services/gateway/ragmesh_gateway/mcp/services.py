"""What the MCP edge is handed by the composition root: the services its tools and resources call.

A Protocol, so that this edge names the features it uses and never the composition root above it
(``GatewayServices`` satisfies it).
"""

from __future__ import annotations

from typing import Protocol

from ragmesh_gateway.access.ports import Authenticator, RateLimiter
from ragmesh_gateway.chat.service import ChatService
from ragmesh_gateway.corpora.service import CorpusService
from ragmesh_gateway.files.service import FileService
from ragmesh_gateway.search.service import SearchService
from ragmesh_gateway.settings import GatewaySettings


class McpServices(Protocol):
    settings: GatewaySettings
    search: SearchService
    chat: ChatService
    corpora: CorpusService
    files: FileService
    authenticator: Authenticator
    rate_limiter: RateLimiter
