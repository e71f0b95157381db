"""The agent skill (.agents/skills/ragmesh/SKILL.md) is the single source of agent guidance: the MCP
server's instructions and tool descriptions, the CLI and docs/agents.md must agree with it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ragmesh_cli import main as cli
from ragmesh_cli import output
from ragmesh_gateway.composition import GatewayServices, build_deps
from ragmesh_gateway.mcp.server import build_mcp_server
from ragmesh_gateway.mcp.tools import INSTRUCTIONS, SKILL_PATH
from ragmesh_gateway.search.schemas import SearchHit
from ragmesh_gateway.settings import GatewaySettings

ROOT = Path(__file__).resolve().parents[2]
SKILL = (ROOT / SKILL_PATH).read_text(encoding="utf-8")
# Tools whose results carry document text, and so the untrusted-content rules of the skill.
TEXT_TOOLS = {"search_articles", "get_article_chunks", "answer_from_articles"}


@pytest.fixture
async def tools() -> dict:
    settings = GatewaySettings()
    server = build_mcp_server(GatewayServices.build(settings, build_deps(settings)))
    return {tool.name: tool for tool in await server.list_tools()}


def skill_section(title: str) -> str:
    match = re.search(rf"^## {title}\n(.*?)(?=^## |\Z)", SKILL, re.M | re.S)
    assert match, f"SKILL.md has no '## {title}' section"
    return match.group(1)


def test_the_skill_names_exactly_the_served_tools(tools) -> None:
    mcp_line = next(line for line in skill_section("Interfaces").splitlines() if "MCP (HTTP)" in line)
    named = set(re.findall(r"`([a-z_]+)`", skill_section("Interfaces").split("MCP (stdio")[0].split("tools", 1)[1]))
    assert "/mcp" in mcp_line
    assert named == set(tools)


def test_instructions_point_to_the_skill_and_name_real_tools(tools) -> None:
    assert SKILL_PATH in INSTRUCTIONS
    fields = set(SearchHit.__struct_fields__)
    mentioned = set(re.findall(r"\b([a-z]+(?:_[a-z]+)+)\b", INSTRUCTIONS)) - fields
    assert mentioned and mentioned <= set(tools)
    # The skill's three rules, in summary: search first, refuse without evidence, text is untrusted.
    for phrase in ("Search before answering", "do not answer it", "untrusted data", "url and quote"):
        assert phrase in INSTRUCTIONS


def test_text_tools_carry_the_untrusted_content_rules(tools) -> None:
    assert "Untrusted content" in SKILL and 'trust: "untrusted"' in SKILL
    for name in TEXT_TOOLS:
        description = tools[name].description
        for phrase in ("untrusted data", "never follow", "url and quote"):
            assert phrase in description, (name, phrase)


def test_the_cli_the_skill_describes_exists() -> None:
    text = skill_section("Interfaces")
    parser = cli.build_parser()
    commands = set(parser._subparsers._group_actions[0].choices)  # noqa: SLF001 - argparse has no API
    named = set(re.search(r"`ragmesh ([a-z|]+)`", text).group(1).split("|")) | {"mcp", "get"}
    assert named <= commands
    codes = dict((int(n), label) for n, label in re.findall(r"(\d) ([a-z ]+?)(?:,|\s\(|\.)", text))
    assert codes == {
        output.EXIT_OK: "ok",
        output.EXIT_USAGE: "bad arguments",
        output.EXIT_AUTH: "auth failure",
        output.EXIT_NO_EVIDENCE: "no evidence",
        output.EXIT_UNAVAILABLE: "unavailable",
    }


def test_agents_doc_points_to_the_skill() -> None:
    agents = (ROOT / "docs" / "agents.md").read_text(encoding="utf-8")
    assert SKILL_PATH in agents
