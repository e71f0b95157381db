"""The corpora's original files as MCP resources: one template per readable corpus, read from the
active index only, under the same ACL as GET /files (a corpus the caller may not read answers
exactly like one that does not exist)."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from gateway_auth import StaticAuthenticator
from gateway_mesh import Mesh
from loopback_server import serve
from ragmesh_gateway.access.ports import Caller
from ragmesh_gateway.app import create_app
from ragmesh_gateway.composition import build_deps

INTERNAL = "internal@1"
LINES = "".join(f"line {n}\n" for n in range(1, 21))


@pytest.fixture
def corpus_root(tmp_path: Path) -> Path:
    (tmp_path / "guide").mkdir()
    (tmp_path / "guide" / "page6.md").write_text(LINES, encoding="utf-8")
    (tmp_path / "guide" / "on disk only.md").write_text("never indexed\n", encoding="utf-8")
    (tmp_path / "manual.pdf").write_bytes(b"%PDF-1.4\n%%EOF\n")
    (tmp_path / "secret.md").write_text("internal only\n", encoding="utf-8")
    return tmp_path


def app_for(mesh: Mesh, root: Path, readable: frozenset[str] | None = None):
    mesh.retrieval.indexed_files = {("docs@1", "manual.pdf"), (INTERNAL, "secret.md")}
    settings = mesh.settings(corpora=["docs@1", INTERNAL], corpus_roots={"docs@1": str(root), INTERNAL: str(root)})
    deps = build_deps(settings)
    if readable is not None:
        deps.authenticator = StaticAuthenticator(Caller(principal="reader", readable_corpora=readable,
                                                        scopes=frozenset({"rag:read", "rag:search"})))
    return create_app(settings, deps)


async def test_each_readable_corpus_has_a_resource_template(mesh: Mesh, corpus_root: Path) -> None:
    async with serve(app_for(mesh, corpus_root, frozenset({"docs@1"}))) as url:
        async with Client(f"{url}/mcp") as client:
            templates = (await client.list_resource_templates()).resource_templates
            listed = (await client.list_resources()).resources
    assert [t.uri_template for t in templates] == ["ragmesh://files/docs@1/{+path}{?lines}"]
    assert "source_path" in templates[0].description and "lines" in templates[0].description
    assert listed == []  # files are reached through the templates, never enumerated


async def test_read_a_whole_file_and_the_lines_around_a_quote(mesh: Mesh, corpus_root: Path) -> None:
    async with serve(app_for(mesh, corpus_root)) as url:
        async with Client(f"{url}/mcp") as client:
            whole = await client.read_resource("ragmesh://files/docs@1/guide/page6.md")
            window = await client.read_resource("ragmesh://files/docs@1/guide/page6.md?lines=6-9")
            tail = await client.read_resource("ragmesh://files/docs@1/guide/page6.md?lines=19-40")
            pdf = await client.read_resource("ragmesh://files/docs@1/manual.pdf")
    (content,) = whole.contents
    assert content.text == LINES and content.mime_type == "text/markdown"
    assert str(content.uri) == "ragmesh://files/docs@1/guide/page6.md"
    assert window.contents[0].text == "line 6\nline 7\nline 8\nline 9\n"
    assert window.contents[0].meta == {"ragmesh/lines": [6, 9], "ragmesh/total_lines": 20}
    assert tail.contents[0].text == "line 19\nline 20\n"
    assert base64.b64decode(pdf.contents[0].blob) == b"%PDF-1.4\n%%EOF\n"
    assert pdf.contents[0].mime_type == "application/pdf"


@pytest.mark.parametrize(
    "uri",
    [
        "ragmesh://files/internal@1/secret.md",  # exists and is indexed, but not readable by this caller
        "ragmesh://files/ghost@1/secret.md",  # no such corpus
        "ragmesh://files/docs@1/guide/on%20disk%20only.md",  # on disk, not in the active index
        "ragmesh://files/docs@1/nope.md",
        "ragmesh://files/docs@1/../secret.md",
        "ragmesh://files/docs@1/.env",
    ],
)
async def test_forbidden_unindexed_and_missing_files_are_one_not_found(
    mesh: Mesh, corpus_root: Path, uri: str
) -> None:
    async with serve(app_for(mesh, corpus_root, frozenset({"docs@1"}))) as url:
        async with Client(f"{url}/mcp") as client:
            with pytest.raises(MCPError) as refused:
                await client.read_resource(uri)
    assert refused.value.error.code == -32602
    assert refused.value.error.message == "Resource not found"
    assert refused.value.error.data == {"uri": uri}


@pytest.mark.parametrize(
    "uri", ["https://example.com/x", "ragmesh://files/docs@1/guide/page6.md?lines=9-6",
            "ragmesh://files/docs@1/guide/page6.md?lines=abc", "ragmesh://files/docs@1"],
)
async def test_bad_resource_uris_are_invalid_params(mesh: Mesh, corpus_root: Path, uri: str) -> None:
    async with serve(app_for(mesh, corpus_root)) as url:
        async with Client(f"{url}/mcp") as client:
            with pytest.raises(MCPError) as refused:
                await client.read_resource(uri)
    assert refused.value.error.code == -32602


async def test_a_grant_opens_the_internal_corpus(mesh: Mesh, corpus_root: Path) -> None:
    async with serve(app_for(mesh, corpus_root, frozenset({"docs@1", INTERNAL}))) as url:
        async with Client(f"{url}/mcp") as client:
            templates = (await client.list_resource_templates()).resource_templates
            secret = await client.read_resource("ragmesh://files/internal@1/secret.md")
    assert len(templates) == 2
    assert secret.contents[0].text == "internal only\n"


async def test_reading_needs_the_read_scope(mesh: Mesh, corpus_root: Path) -> None:
    mesh.retrieval.indexed_files = {("docs@1", "manual.pdf")}
    settings = mesh.settings(corpus_roots={"docs@1": str(corpus_root)})
    deps = build_deps(settings)
    deps.authenticator = StaticAuthenticator(
        Caller(principal="searcher", readable_corpora=frozenset({"docs@1"}), scopes=frozenset({"rag:search"})))
    async with serve(create_app(settings, deps)) as url:
        async with Client(f"{url}/mcp") as client:
            with pytest.raises(MCPError) as refused:
                await client.read_resource("ragmesh://files/docs@1/manual.pdf")
    assert "PERMISSION_DENIED" in refused.value.error.message
