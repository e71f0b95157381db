"""A fixed-caller Authenticator, for tests that need a caller with a narrower ACL."""

from __future__ import annotations

from ragmesh_gateway.access.ports import Authenticator, Caller, RequestInfo


class StaticAuthenticator(Authenticator):
    def __init__(self, caller: Caller) -> None:
        self.caller = caller
        self.seen: list[RequestInfo] = []

    async def authenticate(self, request: RequestInfo) -> Caller:
        self.seen.append(request)
        return self.caller
