"""What a visitor sees of an answer, in headless Chromium: safe Markdown, citations numbered in
answer order, "view source", the security note, a refusal in plain words, and a citation that
opens under token auth.

The first tests drive the widget against a scripted gateway (a local HTTP server that serves the
widget file and a canned SSE stream), so every rendering rule is exercised with an answer chosen
for it. The last one uses the Compose-like mesh (token auth, anonymous site traffic allowed): the
anonymous visitor's citation opens the source view with the cited lines marked and in view.
Screenshots go to artifacts/.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, quote, urlsplit

import httpx
import pytest

from chromium import WebDriver, browser  # noqa: F401 - the fixture

pytestmark = [pytest.mark.e2e, pytest.mark.needs_program("chromium")]

WIDGET = Path(__file__).resolve().parents[2] / "services" / "gateway" / "ragmesh_gateway" / "widget" / "widget.js"
PAGE = b"""<!DOCTYPE html><html><head><meta charset="utf-8"><title>widget</title>
<script type="module" src="/widget/widget.js"></script></head>
<body><ragmesh-chat api="/api/rag/v1" question-param="q"></ragmesh-chat></body></html>"""


def source(n: int, path: str, lines: tuple[int, int], heading: list[str]) -> dict:
    return {"source_id": f"S{n}", "chunk_id": f"c{n}", "corpus": "tern@main", "title": heading[0],
            "heading_path": heading, "url": f"/api/rag/v1/source/tern@main/{path}?lines={lines[0]}-{lines[1]}#L{lines[0]}",
            "quote": "q", "source_path": path, "source_lines": list(lines), "download_path": "",
            "index_version": "v1", "guard_rules": [], "scores": {}}


# Cites S2 first, then S3, then S1: the visitor must read [1], [2], [1], [3].
ANSWER_TOKENS = [
    "The default is **8** jobs at once: `max_parallel` [S2] and _retries_ follow ",
    "`retry_limit` [S3].\n\n- raise it in `tern.toml` [S2]\n",
    "- a document said <img src=x onerror=alert(1)> here [S1]",
]
ANSWER_SOURCES = [
    source(2, "guide/configuration.md", (9, 16), ["Configuration", "Scheduler settings"]),
    source(3, "guide/jobs.md", (21, 24), ["Jobs", "Retries"]),
    source(1, "guide/notes.md", (3, 3), ["Notes"]),
]


def stream(question: str) -> bytes:
    events = [("meta", {"request_id": "req-1", "index_version": "v1", "index_versions": ["v1"], "model": "m",
                        "session_id": None, "degraded": []})]
    if "nothing" in question:
        events += [("token", {"text": "I can't answer that from the indexed documents."}),
                   ("sources", {"sources": [], "security": {"trust": "untrusted", "findings_count": 0,
                                                            "flagged_sources": [], "rules": []}}),
                   ("done", {"answer_status": "insufficient_evidence", "model": "", "finish_reason": "no_sources",
                             "degraded": [], "hint": "No passage passed the relevance threshold."})]
    else:
        events += [("token", {"text": t}) for t in ANSWER_TOKENS]
        events += [("sources", {"sources": ANSWER_SOURCES, "basis": "cited",
                                "security": {"trust": "untrusted", "findings_count": 1, "max_severity": "high",
                                             "rules": ["instruction_override"], "flagged_sources": ["S1"]}}),
                   ("done", {"answer_status": "answered", "model": "m", "finish_reason": "stop", "degraded": []})]
    return b"".join(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events)


class ScriptedGateway(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:  # keep the test output clean
        pass

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        if path == "/widget/widget.js":
            self._send(200, WIDGET.read_bytes(), "text/javascript")
        elif path == "/page.html":
            self._send(200, PAGE, "text/html")
        else:
            self._send(404, b"{}", "application/json")

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self._send(200, stream(body["question"]), "text/event-stream")


@pytest.fixture(scope="module")
def scripted() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), ScriptedGateway)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_markdown_is_rendered_safely_and_citations_are_numbered_in_answer_order(
    scripted: str, browser: WebDriver
) -> None:
    browser.open(f"{scripted}/page.html?q={quote('How many jobs run at once?')}")
    shown = browser.wait_for(lambda s: s["state"] in ("done", "error"), timeout=30)
    assert shown["answerStatus"] == "answered", shown
    markup = shown["markup"]
    assert markup["strong"] == ["8"] and markup["em"] == ["retries"]
    assert markup["code"] == ["max_parallel", "retry_limit", "tern.toml"]
    assert len(markup["items"]) == 2 and markup["items"][0].startswith("raise it in tern.toml")
    # Document text is text: the tag shows as written and makes no element.
    assert markup["injected"] == 0 and "<img src=x onerror=alert(1)>" in shown["answer"]
    assert "**" not in shown["answer"] and "`" not in shown["answer"] and "[S" not in shown["answer"]

    assert [(c["text"], c["source"]) for c in shown["citations"]] == [
        ("[1]", "S2"), ("[2]", "S3"), ("[1]", "S2"), ("[3]", "S1")]
    assert shown["citations"][0]["href"] == (
        f"{scripted}/api/rag/v1/source/tern@main/guide/configuration.md?lines=9-16#L9")
    assert shown["sourceIds"] == ["S2", "S3", "S1"]
    assert [s.split("]")[0] + "]" for s in shown["sources"]] == ["[1]", "[2]", "[3]"]
    assert shown["viewSource"] == [
        f"{scripted}/api/rag/v1/source/tern@main/guide/configuration.md?lines=9-16#L9",
        f"{scripted}/api/rag/v1/source/tern@main/guide/jobs.md?lines=21-24#L21",
        f"{scripted}/api/rag/v1/source/tern@main/guide/notes.md?lines=3-3#L3",
    ]
    # The note counts the passages the visitor is shown.
    assert shown["security"].startswith("1 of the 3 passages shown contained text that looked like instructions")
    browser.save_screenshot("widget-markdown.png")


def test_a_refusal_is_worded_for_a_visitor(scripted: str, browser: WebDriver) -> None:
    browser.open(f"{scripted}/page.html?q={quote('nothing about this')}")
    shown = browser.wait_for(lambda s: s["state"] in ("done", "error"), timeout=30)
    assert shown["answerStatus"] == "insufficient_evidence"
    assert shown["answer"].startswith("Sorry, the documentation doesn't seem to cover that.")
    assert "indexed documents" not in shown["answer"] and "threshold" not in shown["status"]
    assert shown["citations"] == [] and shown["sources"] == [] and shown["security"] == ""


READ_SOURCE_VIEW = """
const target = document.querySelector(':target');
const box = target ? target.getBoundingClientRect() : null;
return {
  hash: location.hash, target: target ? target.id : null,
  inView: box ? box.top >= 0 && box.bottom <= window.innerHeight : false,
  cited: [...document.querySelectorAll('mark.cited')].map(m => m.id + ' ' + m.querySelector('.t').textContent),
  raw: document.querySelector('a.raw').href,
  scripts: document.scripts.length,
};
"""


def test_an_anonymous_visitor_opens_a_citation_under_token_auth(observed_mesh, browser: WebDriver) -> None:
    gateway = observed_mesh.gateway_url
    question = "How deep is the Quokka scheduler queue?"
    browser.open(f"{gateway}/widget/index.html?q={quote(question)}")
    shown = browser.wait_for(lambda s: s["state"] in ("done", "error"))
    assert shown["state"] == "done" and shown["answerStatus"] == "answered", shown
    link = shown["citations"][0]
    assert link["text"] == "[1]" and "/api/rag/v1/source/quokka@1.0/guide/install.md?lines=" in link["href"]

    browser.open(link["href"])
    view = browser.run(READ_SOURCE_VIEW)
    start = parse_qs(urlsplit(link["href"]).query)["lines"][0].split("-")[0]
    assert view["hash"] == f"#L{start}" and view["target"] == f"L{start}" and view["inView"], view
    assert any("forty-two jobs per worker" in line for line in view["cited"]), view
    assert view["scripts"] == 0
    browser.save_screenshot("source-view.png")

    # Without a token: the view and the raw file it links, the same as the chat just answered.
    anonymous_view = httpx.get(link["href"], timeout=30)
    raw = httpx.get(view["raw"], timeout=30)
    assert anonymous_view.status_code == 200 and raw.status_code == 200
    assert "forty-two jobs per worker" in raw.text
    # A path outside what the index holds is the same 404 as any refusal.
    missing = httpx.get(f"{gateway}/api/rag/v1/source/quokka@1.0/guide/nothing.md", timeout=30)
    assert missing.status_code == 404 and missing.json()["code"] == "NOT_FOUND"
