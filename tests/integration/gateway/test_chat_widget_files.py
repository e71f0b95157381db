"""The gateway serves the site widget at /widget/ with the headers nginx would add."""

from __future__ import annotations

from litestar.testing import AsyncTestClient


async def test_demo_page_and_script_are_served_with_widget_headers(client: AsyncTestClient) -> None:
    page = await client.get("/widget/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "<ragmesh-chat" in page.text and 'src="./widget.js"' in page.text
    assert (await client.get("/widget/index.html")).text == page.text
    script = await client.get("/widget/widget.js")
    assert script.status_code == 200
    assert script.headers["content-type"].split(";")[0] in ("text/javascript", "application/javascript")
    assert 'customElements.define("ragmesh-chat"' in script.text
    for response in (page, script):
        csp = response.headers["content-security-policy"]
        assert "default-src 'self'" in csp and "connect-src 'self'" in csp and "frame-ancestors *" in csp
        assert response.headers["x-content-type-options"] == "nosniff"
        assert "x-frame-options" not in response.headers


async def test_nothing_outside_the_widget_folder_is_served(client: AsyncTestClient) -> None:
    for path in ("/widget/../settings.py", "/widget/%2e%2e/settings.py", "/widget/missing.js"):
        response = await client.get(path)
        assert response.status_code == 404, path
        assert "GatewaySettings" not in response.text


async def test_the_root_sends_a_browser_to_the_widget_and_lists_the_api_for_a_client(
    client: AsyncTestClient,
) -> None:
    # A newcomer opening http://127.0.0.1:8080/ got ROUTE_NOT_FOUND (issue 15).
    browser = await client.get("/", headers={"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"},
                               follow_redirects=False)
    assert browser.status_code == 303 and browser.headers["location"] == "/widget/"
    api = await client.get("/", headers={"Accept": "application/json"})
    assert api.status_code == 200 and api.headers["content-type"].startswith("application/json")
    links = api.json()
    assert links["widget"] == "/widget/" and links["openapi"] == "/schema/openapi.json"
    assert links["ready"] == "/health/ready" and links["search"] == "POST /api/rag/v1/search"
    for path in (links["widget"], links["openapi"]):
        assert (await client.get(path)).status_code == 200, path
    assert (await client.get("/", headers={"Accept": "*/*"})).status_code == 200
