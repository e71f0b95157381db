"""The site widget's static files (``ragmesh_gateway/widget/``) at ``/widget/``.

In compose, nginx serves the same folder itself (deploy/Dockerfile copies it into the edge image)
and only falls back to the gateway; the embedded default has no nginx, so the gateway serves it
with the headers nginx would add (snippets/security-headers-widget.conf): the widget may be
framed by other sites, runs only scripts from this origin and talks only to this origin.
"""

from __future__ import annotations

from pathlib import Path

from litestar import Response, Router
from litestar.static_files import create_static_files_router

WIDGET_DIR = Path(__file__).resolve().parent.parent / "widget"

WIDGET_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; style-src 'self' 'unsafe-inline'; connect-src 'self'; "
    "frame-ancestors *",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "strict-origin-when-cross-origin",
    "Cache-Control": "public, max-age=300",
}


def _with_widget_headers(response: Response) -> Response:
    response.headers.update(WIDGET_HEADERS)
    return response


def widget_router() -> Router:
    return create_static_files_router(
        path="/widget",
        directories=[WIDGET_DIR],
        html_mode=True,
        name="widget",
        after_request=_with_widget_headers,
        include_in_schema=False,
    )
