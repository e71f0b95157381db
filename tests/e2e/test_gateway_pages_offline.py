"""Each HTML page of the gateway, opened in Chromium with the outside network blocked, asks only the
gateway for anything, and shows what it is for: the API reference renders Swagger UI, the widget
its chat element, a citation its marked lines.

``/schema`` was a blank page offline: its script and fonts came from public CDNs (issue 23). The
browser resolves no host name but the mesh's loopback address, and chromedriver's performance log
names every request it made, so a page that asks another host fails here even where the machine
has internet. tests/integration/gateway/test_pages_offline.py is the fast check of the same pages.
"""

from __future__ import annotations

import time
from urllib.parse import urlsplit

import pytest

from chromium import WebDriver, offline_browser  # noqa: F401 - the fixture

pytestmark = [pytest.mark.e2e, pytest.mark.needs_program("chromium")]

NETWORK_SCHEMES = ("http", "https", "ws", "wss")
SOURCE_VIEW = "/api/rag/v1/source/quokka@1.0/guide/install.md?lines=1-3"
# Each page, and what it shows once it has rendered (a script returning a truthy value).
PAGES = {
    "/": "return document.querySelector('ragmesh-chat')?.shadowRoot?.querySelector('.status') != null",
    "/widget/": "return document.querySelector('ragmesh-chat')?.shadowRoot?.querySelector('.status') != null",
    "/schema": "return document.querySelector('.swagger-ui .info .title')?.textContent || ''",
    "/schema/swagger": "return document.querySelector('.swagger-ui .info .title')?.textContent || ''",
    SOURCE_VIEW: "return document.querySelector('mark.cited') != null",
}
SWAGGER_OPERATIONS = "return [...document.querySelectorAll('.swagger-ui .opblock-summary-path')].map(e => e.textContent)"


def rendered(browser: WebDriver, script: str, timeout: float = 60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if browser.run("return document.readyState") == "complete" and (seen := browser.run(script)):
            return seen
        time.sleep(0.25)
    body = browser.run("return document.body ? document.body.innerText.slice(0, 300) : ''")
    raise AssertionError(f"the page never rendered ({script}); it shows: {body!r}")


@pytest.mark.parametrize("path", list(PAGES))
def test_a_page_asks_no_other_host_and_renders_offline(mesh, offline_browser: WebDriver, path: str) -> None:
    gateway = urlsplit(mesh.gateway_url).netloc
    offline_browser.requested_urls()  # forget what earlier pages asked for
    offline_browser.open(f"{mesh.gateway_url}{path}")
    shown = rendered(offline_browser, PAGES[path])
    if path.startswith("/schema"):
        assert "ragmesh gateway" in shown, shown
        operations = offline_browser.run(SWAGGER_OPERATIONS)
        assert "/api/rag/v1/search" in "".join(operations), operations
    time.sleep(0.5)  # let late requests (fonts, icons) be logged
    # Over the network only: data:, blob: and the browser's own chrome:// pages never leave it.
    asked = [url for url in offline_browser.requested_urls() if urlsplit(url).scheme in NETWORK_SCHEMES]
    assert f"{mesh.gateway_url}{path}" in asked, f"the performance log missed the page itself: {asked}"
    elsewhere = [url for url in asked if urlsplit(url).netloc != gateway]
    assert not elsewhere, f"{path} asked another host: {elsewhere}"
