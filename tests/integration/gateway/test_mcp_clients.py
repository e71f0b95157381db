"""Every MCP client configuration in docs/agents.md, run: each JSON block marked ``client-config``
goes through the official MCP Inspector CLI (Node 22, tests/conformance/npm) against a gateway with
token authentication, and must call a tool. The Inspector commands of the same page run too.

The desktop applications (Claude Desktop, Cursor, VS Code) cannot run here; their files are run
through the Inspector as each application would read them (docs/agents.md says how, per client).
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

from gateway_mesh import Mesh
from loopback_server import serve
from gateway_tokens import bearer, schema, token_app, tokens  # noqa: F401 - fixtures
from npm_tools import ROOT, node_env, tool

DOC = ROOT / "docs" / "agents.md"
_BLOCK = re.compile(r"<!-- client-config: (?P<name>[\w-]+) -->.*?```json\n(?P<body>.*?)\n```", re.S)
TOKEN_PLACEHOLDERS = ("rmk_e5ae7c7a0024eaaf_...", "${RAGMESH_TOKEN}", "${input:ragmesh-token}")
DOCUMENTED_URL = "http://127.0.0.1:8080"
DOCUMENTED_COMMAND = "/path/to/ragmesh/.venv/bin/ragmesh"


def documented_configs() -> dict[str, str]:
    return {m.group("name"): m.group("body") for m in _BLOCK.finditer(DOC.read_text(encoding="utf-8"))}


def as_the_client_reads_it(name: str, text: str, url: str, token: str) -> dict:
    """The file with what its client fills in (variables, the real paths), in Inspector form."""
    for placeholder in TOKEN_PLACEHOLDERS:
        text = text.replace(placeholder, token)
    text = text.replace(DOCUMENTED_URL, url).replace(DOCUMENTED_COMMAND, str(ROOT / ".venv" / "bin" / "ragmesh"))
    config = json.loads(text)
    if name == "vscode":  # VS Code keeps servers under "servers" and asks for "inputs" itself
        assert {i["id"] for i in config["inputs"]} == {"ragmesh-token"}
        config = {"mcpServers": config["servers"]}
    if name == "cursor":  # Cursor infers Streamable HTTP from "url"; the Inspector needs the type
        assert "type" not in config["mcpServers"]["ragmesh"]
        config["mcpServers"]["ragmesh"]["type"] = "http"
    return config


async def inspector(*args: str, home: Path) -> tuple[int, str, str]:
    env = {**node_env(), "HOME": str(home), "MCP_INSPECTOR_SECRET_STORE": "memory"}
    process = await asyncio.create_subprocess_exec(
        str(tool("mcp-inspector")), "--cli", *args, env=env, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 120)
    return process.returncode, out.decode(errors="replace"), err.decode(errors="replace")


SEARCH = ("--method", "tools/call", "--tool-name", "search_articles",
          "--tool-arg", "query=how do I start?", "--tool-arg", "top_k=1")


async def test_every_documented_client_configuration_calls_a_tool(
    mesh: Mesh, pg_url: str, schema: str, tokens: dict[str, str], tmp_path: Path
) -> None:
    configs = documented_configs()
    assert set(configs) == {"claude-desktop", "claude-code", "cursor", "vscode"}
    results = {}
    async with serve(token_app(mesh, pg_url, schema, allow_anonymous=False)) as url:
        for name, text in configs.items():
            path = tmp_path / f"{name}.json"
            path.write_text(json.dumps(as_the_client_reads_it(name, text, url, tokens["reader"])), encoding="utf-8")
            code, out, err = await inspector("--config", str(path), "--server", "ragmesh", *SEARCH, home=tmp_path)
            assert code == 0, (name, out[-2000:], err[-2000:])
            results[name] = json.loads(out)
    for name, result in results.items():
        assert not result.get("isError"), (name, result)
        assert result["structuredContent"]["results"][0]["url"] == "https://docs.example/page6", name


async def test_the_documented_inspector_commands(
    mesh: Mesh, pg_url: str, schema: str, tokens: dict[str, str], tmp_path: Path
) -> None:
    header = ("--header", f"Authorization: Bearer {tokens['reader']}")
    async with serve(token_app(mesh, pg_url, schema, allow_anonymous=False)) as url:
        listed = await inspector(f"{url}/mcp", *header, "--method", "tools/list", home=tmp_path)
        called = await inspector(f"{url}/mcp", *header, *SEARCH, home=tmp_path)
        refused = await inspector(f"{url}/mcp", "--stored-auth-only", "--method", "tools/list", home=tmp_path)
    assert listed[0] == 0 and [t["name"] for t in json.loads(listed[1])["tools"]] == [
        "search_articles", "get_article_chunks", "answer_from_articles", "list_corpora", "knowledge_base_stats"]
    hit = json.loads(called[1])["structuredContent"]["results"][0]
    assert (hit["url"], hit["source_lines"], hit["index_version"]) == ("https://docs.example/page6", [6, 9], "v1")
    # No interactive OAuth: the gateway's own code, message and advice reach the user.
    assert refused[0] != 0 and "UNAUTHENTICATED" in refused[2] and "ragmesh token create" in refused[2]
