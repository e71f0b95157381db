"""What the gateway publishes stays byte-identical across refactors: its OpenAPI document and MCP catalog.

Both are rebuilt from a live app served over loopback (``GET /schema/openapi.json``; ``initialize``,
``tools/list``, ``resources/templates/list`` over ``/mcp``) and compared with the snapshots in
``tests/fixtures/contracts/``, pretty-printed with sorted keys. A change to either is a change of the
public contract: make it on purpose, regenerate with ``RAGMESH_WRITE_CONTRACTS=1`` and name it in
the commit.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import pytest

from gateway_mesh import Mesh
from loopback_server import serve
from ragmesh_gateway.app import create_app

SNAPSHOTS = Path(__file__).resolve().parents[2] / "fixtures" / "contracts"
MCP_HEADERS = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2025-06-18",
}
INIT = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "snapshot", "version": "1"}}


def pretty(document: object) -> str:
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


async def rpc(http: httpx.AsyncClient, method: str, params: dict) -> dict:
    response = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    assert response.status_code == 200, response.text
    return response.json()["result"]


@pytest.fixture
async def published(mesh: Mesh) -> dict[str, str]:
    async with serve(create_app(mesh.settings())) as base_url:
        async with httpx.AsyncClient(base_url=base_url, headers=MCP_HEADERS, timeout=10) as http:
            openapi = (await http.get("/schema/openapi.json")).json()
            initialized = await rpc(http, "initialize", INIT)
            initialized["serverInfo"].pop("version")  # the package version, not the contract
            catalog = {
                "initialize": initialized,
                "tools/list": await rpc(http, "tools/list", {}),
                "resources/templates/list": await rpc(http, "resources/templates/list", {}),
            }
    return {"openapi.json": pretty(openapi), "mcp_catalog.json": pretty(catalog)}


@pytest.mark.parametrize("name", ["openapi.json", "mcp_catalog.json"])
async def test_published_contract_matches_its_snapshot(published: dict[str, str], name: str) -> None:
    snapshot = SNAPSHOTS / name
    if os.environ.get("RAGMESH_WRITE_CONTRACTS") == "1":
        snapshot.write_text(published[name], encoding="utf-8")
    assert snapshot.read_text(encoding="utf-8") == published[name], (
        f"{name} changed: if on purpose, rerun with RAGMESH_WRITE_CONTRACTS=1 and name the change in the commit"
    )


def test_the_snapshots_hold_the_whole_contract() -> None:
    openapi = json.loads((SNAPSHOTS / "openapi.json").read_text(encoding="utf-8"))
    catalog = json.loads((SNAPSHOTS / "mcp_catalog.json").read_text(encoding="utf-8"))
    assert len(openapi["paths"]) >= 13 and "ErrorBody" in openapi["components"]["schemas"]
    assert len(catalog["tools/list"]["tools"]) == 5
    assert catalog["initialize"]["instructions"]
