"""``/schema``: the API reference UI (Swagger UI) from files that ship in a pip package, and the favicon.

Litestar's render plugins load their scripts, styles and icon from public CDNs, so ``/schema`` was a
blank page without internet, although nothing else the gateway serves needs it. Swagger UI's files
come from ``swagger-ui-bundle`` (pinned in requirements.lock and the gateway image's lock) and are
served here, under ``/schema/ui/``; the other UIs Litestar offers (ReDoc, RapiDoc, Elements) exist
only on a CDN and are not served. No page of the gateway names another host
(tests/e2e/test_gateway_pages_offline.py loads each one in Chromium with the network blocked).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import swagger_ui_bundle
from litestar import Request, get
from litestar.exceptions import NotFoundException
from litestar.response import File
from litestar.openapi.plugins import JsonRenderPlugin, OpenAPIRenderPlugin, SwaggerRenderPlugin, YamlRenderPlugin

SCHEMA_PATH = "/schema"
ASSETS = f"{SCHEMA_PATH}/ui"
SWAGGER_UI_DIR = Path(swagger_ui_bundle.swagger_ui_path)
# Only what the page loads: the package also holds a demo index.html that points at petstore.swagger.io.
SWAGGER_UI_FILES = {
    "swagger-ui-bundle.js": "text/javascript",
    "swagger-ui-standalone-preset.js": "text/javascript",
    "swagger-ui.css": "text/css",
}
# The icon of every page (the widget links its own copy, ./favicon.svg, which nginx serves in Compose).
FAVICON_SVG = Path(__file__).resolve().parent.parent / "widget" / "favicon.svg"
FAVICON_LINK = '<link rel="icon" type="image/svg+xml" href="/widget/favicon.svg">'
_ASSET_HEADERS = {"Cache-Control": "public, max-age=3600", "X-Content-Type-Options": "nosniff"}


class OfflineSwaggerRenderPlugin(SwaggerRenderPlugin):
    """Swagger UI at ``/schema`` and ``/schema/swagger``, every file from this gateway."""

    def __init__(self) -> None:
        super().__init__(
            js_url=f"{ASSETS}/swagger-ui-bundle.js",
            css_url=f"{ASSETS}/swagger-ui.css",
            standalone_preset_js_url=f"{ASSETS}/swagger-ui-standalone-preset.js",
            path=["/", "/swagger"],
            favicon=FAVICON_LINK,
        )

    def render(self, request: Request, openapi_schema: dict[str, Any]) -> bytes:
        # Swagger UI 4 (the bundle's) shows only documents whose version starts with "3.0." and
        # refuses Litestar's "3.1.0" outright ("does not specify a valid version field"). The page
        # hands it the same document labelled 3.0.3; the few 3.1 forms in it (a type list such as
        # ["string", "null"], `const`) show as written. /schema/openapi.json stays 3.1.0.
        return super().render(request, {**openapi_schema, "openapi": "3.0.3"})


def render_plugins() -> list[OpenAPIRenderPlugin]:
    return [OfflineSwaggerRenderPlugin(), JsonRenderPlugin(), YamlRenderPlugin()]


@get(f"{ASSETS}/{{name:str}}", include_in_schema=False, sync_to_thread=False)
def swagger_ui_file(name: str) -> File:
    media_type = SWAGGER_UI_FILES.get(name)
    if media_type is None:
        raise NotFoundException()
    return File(SWAGGER_UI_DIR / name, media_type=media_type, content_disposition_type="inline",
                headers=dict(_ASSET_HEADERS))


@get("/favicon.ico", include_in_schema=False, sync_to_thread=False)
def favicon() -> File:
    """What a browser asks for on any page without an icon link (a JSON answer opened in a tab)."""
    return File(FAVICON_SVG, media_type="image/svg+xml", content_disposition_type="inline",
                headers=dict(_ASSET_HEADERS))
