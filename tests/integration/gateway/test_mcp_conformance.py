"""The official MCP conformance suite (@modelcontextprotocol/conformance, run on Node 22 from the npm
registry) against the gateway's /mcp: every scenario that applies to a server with ragmesh's tools
passes; those that need the suite's own fixture tools, prompts or resources are listed, each with
its reason, in tests/conformance/mcp-not-applicable.yml, and must fail for exactly that reason.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import yaml

from gateway_mesh import Mesh
from loopback_server import serve
from npm_tools import ROOT, node_env, tool
from ragmesh_gateway.app import create_app

BASELINE = ROOT / "tests" / "conformance" / "mcp-not-applicable.yml"
# Must pass outright (every check SUCCESS).
APPLICABLE = {"server-initialize", "ping", "tools-list", "resources-list", "dns-rebinding-protection"}
_RUN_DIR = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T")


def results_in(folder: Path) -> dict[str, list[dict]]:
    results: dict[str, list[dict]] = {}
    for checks in folder.glob("*/checks.json"):
        match = _RUN_DIR.match(checks.parent.name)
        assert match, checks
        results[match.group("scenario")] = json.loads(checks.read_text(encoding="utf-8"))
    return results


async def test_every_scenario_that_applies_passes(mesh: Mesh, tmp_path: Path) -> None:
    env = node_env()
    suite = tool("conformance")
    baseline = yaml.safe_load(BASELINE.read_text(encoding="utf-8"))
    async with serve(create_app(mesh.settings())) as url:
        process = await asyncio.create_subprocess_exec(
            str(suite), "server", "--url", f"{url}/mcp", "--expected-failures", str(BASELINE),
            "-o", str(tmp_path), env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )
        output, _ = await asyncio.wait_for(process.communicate(), 240)
    report = output.decode(errors="replace")
    results = results_in(tmp_path)

    # The suite itself: no failure outside the baseline, and no baseline entry that now passes.
    assert process.returncode == 0, report[-4000:]
    assert set(baseline["server"]) == set(baseline["reasons"])
    ran = set(results)
    assert APPLICABLE | set(baseline["server"]) == ran, ran
    for scenario in APPLICABLE:
        assert results[scenario] and {c["status"] for c in results[scenario]} == {"SUCCESS"}, results[scenario]
    for scenario in baseline["server"]:
        reason = baseline["reasons"][scenario]["expect"]
        problems = [c for c in results[scenario] if c["status"] != "SUCCESS"]
        assert problems, (scenario, results[scenario])
        said = [c.get("errorMessage") or (c.get("details") or {}).get("message", "") for c in problems]
        assert all(reason in text for text in said), (scenario, reason, said)
