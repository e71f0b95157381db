"""Print the gateway's OpenAPI document: ``python -m ragmesh_gateway.openapi > docs/openapi.json``.

Built from default settings without contacting any service, so the output only changes when
the code does (tests/integration/gateway/test_api_openapi.py compares it with the committed file).
"""

from __future__ import annotations

import json
import sys

from ragmesh_gateway.app import create_app
from ragmesh_gateway.settings import GatewaySettings


def openapi_document() -> dict:
    app = create_app(GatewaySettings())
    return app.openapi_schema.to_schema()


def render() -> str:
    return json.dumps(openapi_document(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main() -> None:
    sys.stdout.write(render())


if __name__ == "__main__":
    main()
