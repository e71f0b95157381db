"""Every HTML page of the gateway names only the gateway itself: no CDN script, style, font or icon.

``/schema`` loaded Swagger UI's script and fonts from public CDNs and was a blank page offline,
although the README promises no internet at run time (issue 23). The fast check here reads each
served page for absolute URLs; tests/e2e/test_gateway_pages_offline.py loads the same pages in
Chromium with the network blocked and watches every request the browser makes.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import swagger_ui_bundle

from gateway_mesh import Mesh
from loopback_server import serve
from ragmesh_gateway.app import create_app

SOURCE_VIEW = "/api/rag/v1/source/docs@1/guide/intro.md?lines=1-2"
# Each page a browser opens, as a user reaches it: the root sends a browser on to the widget.
HTML_PAGES = ["/", "/widget/", "/widget/index.html", "/schema", "/schema/swagger", SOURCE_VIEW]
# Any absolute URL (scheme or scheme-relative) in the page: a script, style, font, icon or link.
ABSOLUTE_URL = re.compile(r"""(?:\b[a-z][a-z0-9+.-]*:)?//[a-z0-9.-]+\.[a-z]{2,}|https?://""", re.IGNORECASE)
ICON_LINK = re.compile(r"""<link\s+rel=["']icon["'][^>]*href=["']([^"']+)["']""", re.IGNORECASE)
ASSET_REFERENCE = re.compile(r"""<(?:script|link)\b[^>]*(?:src|href)=["']([^"']+)["']""", re.IGNORECASE)


@pytest.fixture
async def gateway(mesh: Mesh, tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    root = tmp_path / "corpus"
    (root / "guide").mkdir(parents=True)
    (root / "guide" / "intro.md").write_text("# Intro\nhello\nthird\n", encoding="utf-8")
    mesh.retrieval.indexed_files = {("docs@1", "guide/intro.md")}
    app = create_app(mesh.settings(corpus_roots={"docs@1": str(root)}))
    async with serve(app) as base_url, httpx.AsyncClient(base_url=base_url, follow_redirects=True) as http:
        yield http


async def html_response(http: httpx.AsyncClient, path: str) -> httpx.Response:
    response = await http.get(path, headers={"Accept": "text/html"})
    assert response.status_code == 200, (path, response.text[:300])
    assert response.headers["content-type"].startswith("text/html"), (path, response.headers)
    return response


async def html_page(http: httpx.AsyncClient, path: str) -> str:
    return (await html_response(http, path)).text


@pytest.mark.parametrize("path", HTML_PAGES)
async def test_no_page_names_another_host(gateway: httpx.AsyncClient, path: str) -> None:
    page = await html_page(gateway, path)
    assert not ABSOLUTE_URL.findall(page), (path, ABSOLUTE_URL.findall(page)[:5])


@pytest.mark.parametrize("path", HTML_PAGES)
async def test_every_page_links_an_icon_the_gateway_serves(gateway: httpx.AsyncClient, path: str) -> None:
    page = await html_response(gateway, path)
    links = ICON_LINK.findall(page.text)
    assert links, f"{path} links no icon: the browser asks for /favicon.ico instead"
    icon = await gateway.get(page.url.join(links[0]))  # relative to where the page ended up
    assert icon.status_code == 200 and icon.headers["content-type"] == "image/svg+xml", (path, links[0])
    assert icon.content.startswith(b"<svg")


async def test_favicon_ico_is_served(gateway: httpx.AsyncClient) -> None:
    # The widget and a JSON answer opened in a tab asked for /favicon.ico, which answered 404.
    icon = await gateway.get("/favicon.ico")
    assert icon.status_code == 200 and icon.headers["content-type"] == "image/svg+xml"
    assert icon.content == (await gateway.get("/widget/favicon.svg")).content


async def test_the_api_reference_loads_swagger_ui_from_the_pip_package(gateway: httpx.AsyncClient) -> None:
    page = await html_page(gateway, "/schema")
    assets = [ref for ref in ASSET_REFERENCE.findall(page) if not ref.endswith(".svg")]
    assert sorted(assets) == ["/schema/ui/swagger-ui-bundle.js", "/schema/ui/swagger-ui-standalone-preset.js",
                              "/schema/ui/swagger-ui.css"], assets
    shipped = Path(swagger_ui_bundle.swagger_ui_path)
    for asset in assets:
        response = await gateway.get(asset)
        assert response.status_code == 200, asset
        assert response.content == (shipped / asset.rsplit("/", 1)[1]).read_bytes(), asset
    # Swagger UI 4 shows only "3.0.x" documents; the page's copy is labelled so, the published one is not.
    assert '"openapi":"3.0.3"' in page
    assert (await gateway.get("/schema/openapi.json")).json()["openapi"] == "3.1.0"


@pytest.mark.parametrize("path", [
    "/schema/ui/index.html",  # the package's demo page, which points at petstore.swagger.io
    "/schema/ui/swagger-initializer.js",
    "/schema/ui/..%2F..%2Fapp.py",
    "/schema/redoc",  # ReDoc, RapiDoc and Elements exist only on a CDN: not served
    "/schema/rapidoc",
    "/schema/elements",
])
async def test_nothing_else_is_served_under_the_api_reference(gateway: httpx.AsyncClient, path: str) -> None:
    response = await gateway.get(path)
    assert response.status_code == 404, (path, response.status_code)
    assert "swagger" not in response.text.lower() and "cdn" not in response.text.lower()
