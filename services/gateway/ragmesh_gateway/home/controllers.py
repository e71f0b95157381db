"""``GET /``: a browser is sent to the site widget; any other client gets the links it needs.

A newcomer opening the gateway's address used to get ``ROUTE_NOT_FOUND``. Browsers say they accept
``text/html``; they go to ``/widget/`` (303). Everything else (curl, scripts) gets a small JSON index
of where things are. Not in the OpenAPI document: it is a signpost, not part of the API.
"""

from __future__ import annotations

from litestar import Request, Response, get
from litestar.status_codes import HTTP_303_SEE_OTHER

API = "/api/rag/v1"
LINKS = {
    "service": "ragmesh gateway",
    "widget": "/widget/",
    "openapi": "/schema/openapi.json",
    "ready": "/health/ready",
    "metrics": "/metrics",
    "mcp": "/mcp",
    "search": f"POST {API}/search",
    "chat": f"POST {API}/chat/stream",
    "corpora": f"GET {API}/corpora",
}


def _wants_html(request: Request) -> bool:
    accepted = [part.split(";")[0].strip().lower() for part in request.headers.get("accept", "").split(",")]
    return "text/html" in accepted


@get("/", include_in_schema=False, sync_to_thread=False)
def root(request: Request) -> Response:
    if _wants_html(request):
        return Response(content=None, status_code=HTTP_303_SEE_OTHER, headers={"Location": LINKS["widget"]})
    return Response(content=LINKS)

