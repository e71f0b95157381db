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
