"""Headless Chromium driven through chromedriver's W3C WebDriver HTTP API with httpx (no selenium).

Shared by the widget tests and the offline page test (``offline_browser``: outside network
blocked, every request recorded). Without chromium and chromedriver the fixture skips (apt-get install -y
chromium chromium-driver); in CI (CI=true) it fails.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from ragmesh_bench.harness import NotServing, serve_on_free_port
from ragmesh_cli.mesh.lifecycle import stop_process

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts"
CHROME_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=1000,900",
]
# What the page shows, read inside the widget's shadow root.
READ_WIDGET = """
const el = document.querySelector('ragmesh-chat');
if (!el || !el.shadowRoot) return null;
const root = el.shadowRoot;
return {
  state: el.dataset.state || '', answerStatus: el.dataset.answerStatus || '',
  feedback: el.dataset.feedback || '',
  status: root.querySelector('.status').textContent,
  hint: root.querySelector('.status').dataset.hint || '',
  answer: root.querySelector('.answer').textContent,
  citations: [...root.querySelectorAll('.answer a.cite')]
    .map(a => ({text: a.textContent, href: a.href, title: a.title, source: a.dataset.source})),
  sources: [...root.querySelectorAll('.sources li')].map(li => li.textContent),
  sourceIds: [...root.querySelectorAll('.sources li')].map(li => li.dataset.source),
  viewSource: [...root.querySelectorAll('.sources a.view')].map(a => a.href),
  security: root.querySelector('.security').hidden ? '' : root.querySelector('.security').textContent,
  markup: {
    code: [...root.querySelectorAll('.answer code')].map(n => n.textContent),
    strong: [...root.querySelectorAll('.answer strong')].map(n => n.textContent),
    em: [...root.querySelectorAll('.answer em')].map(n => n.textContent),
    items: [...root.querySelectorAll('.answer li')].map(n => n.textContent),
    injected: root.querySelectorAll('.answer img, .answer script, .answer iframe').length,
  },
};
"""


def skip_or_fail(config: pytest.Config, reason: str) -> None:
    # tests/conftest.py as pytest loaded it: several conftest modules share the name, so it cannot
    # simply be imported.
    root_conftest = config.pluginmanager.getplugin(str(ROOT / "tests" / "conftest.py"))
    root_conftest.skip_or_fail(reason)


class WebDriver:
    """The few W3C WebDriver commands the test needs."""

    def __init__(self, base: str, session_id: str) -> None:
        self._session_url = f"{base}/session/{session_id}"
        self._http = httpx.Client(base_url=self._session_url, timeout=60)

    def _call(self, method: str, path: str, body: dict | None = None):
        response = self._http.request(method, path, json=body)
        payload = response.json()
        assert response.status_code == 200, payload
        return payload["value"]

    def open(self, url: str) -> None:
        self._call("POST", "/url", {"url": url})

    def run(self, script: str, *args):
        return self._call("POST", "/execute/sync", {"script": script, "args": list(args)})

    def screenshot(self) -> bytes:
        return base64.b64decode(self._call("GET", "/screenshot"))

    def wait_for(self, predicate, timeout: float = 120):
        deadline = time.monotonic() + timeout
        seen = None
        while time.monotonic() < deadline:
            seen = self.run(READ_WIDGET)
            if seen and predicate(seen):
                return seen
            time.sleep(0.25)
        raise AssertionError(f"widget never reached the expected state; last seen: {seen}")

    def save_screenshot(self, name: str) -> Path:
        path = ARTIFACTS / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(self.screenshot())
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        return path

    def requested_urls(self) -> list[str]:
        """Every URL the browser asked for since the last call (needs a session with ``log_network``):
        chromedriver's performance log, one ``Network.requestWillBeSent`` event per request."""
        urls = []
        for entry in self._call("POST", "/se/log", {"type": "performance"}):
            message = json.loads(entry["message"])["message"]
            if message["method"] == "Network.requestWillBeSent":
                urls.append(message["params"]["request"]["url"])
        return urls

    def close(self) -> None:
        # The session's own URL: httpx would add a trailing slash to delete(""), which chromedriver
        # does not know, and the browser would outlive the test.
        self._http.delete(self._session_url)
        self._http.close()


# Outside network blocked: every host name fails to resolve, except the loopback address the mesh
# listens on (an IP literal, which needs no lookup anyway).
OFFLINE_ARGS = ["--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"]


@contextmanager
def chromium_session(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                     extra_args: list[str] | None = None, log_network: bool = False) -> Iterator[WebDriver]:
    """A chromedriver and one headless Chromium session; ``log_network`` records every request the
    browser makes (:meth:`WebDriver.requested_urls`)."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    chromedriver = shutil.which("chromedriver")
    if not chromium or not chromedriver:
        skip_or_fail(request.config, "chromium and chromedriver are not installed "
                                     "(apt-get install -y chromium chromium-driver)")
    log_path = tmp_path_factory.mktemp("chromedriver") / "chromedriver.log"

    def start(port: int) -> subprocess.Popen:
        with log_path.open("ab") as log:
            return subprocess.Popen([chromedriver, f"--port={port}"], stdout=log, stderr=subprocess.STDOUT)

    def ready(port: int) -> bool:
        return httpx.get(f"http://127.0.0.1:{port}/status", timeout=2).json()["value"]["ready"]

    try:
        port, driver = serve_on_free_port(start, ready, timeout=30)
    except NotServing as exc:
        pytest.fail(f"chromedriver did not start: {exc}\n{log_path.read_text(errors='replace')[-2000:]}")
    base = f"http://127.0.0.1:{port}"
    try:
        profile = tmp_path_factory.mktemp("chromium-profile")
        capabilities: dict = {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": chromium,
                                   "args": [*CHROME_ARGS, *(extra_args or []), f"--user-data-dir={profile}"]},
        }
        if log_network:
            capabilities["goog:loggingPrefs"] = {"performance": "ALL"}
        created = httpx.post(f"{base}/session", timeout=60,
                             json={"capabilities": {"alwaysMatch": capabilities}}).json()
        assert "sessionId" in created.get("value", {}), created
        browser = WebDriver(base, created["value"]["sessionId"])
        try:
            yield browser
        finally:
            browser.close()
    finally:
        stop_process(driver.pid, timeout=10.0)
        driver.wait()


@pytest.fixture(scope="module")
def browser(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    with chromium_session(request, tmp_path_factory) as session:
        yield session


@pytest.fixture(scope="module")
def offline_browser(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    """Chromium with the outside network blocked, recording every request it makes."""
    with chromium_session(request, tmp_path_factory, OFFLINE_ARGS, log_network=True) as session:
        yield session
