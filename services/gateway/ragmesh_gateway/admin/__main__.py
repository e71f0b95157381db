"""``python -m ragmesh_gateway.admin token|access ...``: manage API tokens and corpus grants.

The ``ragmesh token`` and ``ragmesh access`` commands run this module (the CLI may not import the
gateway). Reads ``RAGMESH_POSTGRES_URL`` and ``RAGMESH_GATEWAY_DB_SCHEMA`` (default ``gateway``), the
same variables as the gateway, and migrates the schema first, so it works before the gateway ever
ran. Prints one JSON object on stdout; diagnostics go to stderr; never prompts.

Exit codes: 0 ok, 2 bad arguments or settings, 5 database unavailable, 1 anything else.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from ragmesh_common.errors import ErrorCode, RagmeshError

from ragmesh_gateway.access.adapters import SecurityStores
from ragmesh_gateway.access.tokens import Scope
from ragmesh_gateway.admin import operations
from ragmesh_gateway.settings import GatewaySettings

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_UNAVAILABLE = 0, 1, 2, 5

Operation = Callable[[SecurityStores, argparse.Namespace], Awaitable[dict[str, Any]]]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:
        self.print_usage(sys.stderr)
        print(f"ragmesh: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def _scopes(values: list[str]) -> list[str]:
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


async def _create(stores: SecurityStores, args: argparse.Namespace) -> dict[str, Any]:
    tokens, _ = stores.ready()
    return await operations.create_token(tokens, args.client, _scopes(args.scope))


async def _revoke(stores: SecurityStores, args: argparse.Namespace) -> dict[str, Any]:
    tokens, _ = stores.ready()
    return await operations.revoke_token(tokens, args.token_id)


async def _list_tokens(stores: SecurityStores, args: argparse.Namespace) -> dict[str, Any]:
    tokens, _ = stores.ready()
    return await operations.list_tokens(tokens, args.client, active_only=args.active)


async def _grant(stores: SecurityStores, args: argparse.Namespace) -> dict[str, Any]:
    _, access = stores.ready()
    return await operations.grant(access, args.client, args.corpus)


async def _revoke_grant(stores: SecurityStores, args: argparse.Namespace) -> dict[str, Any]:
    _, access = stores.ready()
    return await operations.revoke_grant(access, args.client, args.corpus)


async def _list_grants(stores: SecurityStores, args: argparse.Namespace) -> dict[str, Any]:
    _, access = stores.ready()
    return await operations.list_grants(access, args.client)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="ragmesh", description="API tokens and corpus grants (python -m ragmesh_gateway.admin)"
    )
    groups = parser.add_subparsers(dest="group", required=True, parser_class=_Parser)

    token = groups.add_parser("token", help="API tokens").add_subparsers(
        dest="action", required=True, parser_class=_Parser
    )
    create = token.add_parser("create", help="make a token; its plaintext is printed once, never stored")
    create.add_argument("--client", required=True, help="client id the token speaks for")
    create.add_argument(
        "--scope", action="append", default=[], metavar="SCOPE",
        help=f"repeat or comma-separate; one of {', '.join(s.value for s in Scope)}",
    )
    create.set_defaults(operation=_create)
    revoke = token.add_parser("revoke", help="revoke a token by its id")
    revoke.add_argument("token_id", help="the token's id (`token create` and `token list` print it)")
    revoke.set_defaults(operation=_revoke)
    listed = token.add_parser("list", help="tokens (never their secrets)")
    listed.add_argument("--client", default=None, help="only this client's tokens (default: all)")
    listed.add_argument("--active", action="store_true", help="leave out revoked tokens")
    listed.set_defaults(operation=_list_tokens)

    access = groups.add_parser("access", help="corpus read grants").add_subparsers(
        dest="action", required=True, parser_class=_Parser
    )
    for name, operation, helptext in (
        ("grant", _grant, "let a client read an internal corpus"),
        ("revoke", _revoke_grant, "take that access away"),
    ):
        p = access.add_parser(name, help=helptext)
        p.add_argument("--client", required=True, help="client id (as given to `token create`)")
        p.add_argument("--corpus", required=True, help="corpus id (library@version)")
        p.set_defaults(operation=operation)
    grants = access.add_parser("list", help="grants, of one client or all")
    grants.add_argument("--client", default=None, help="only this client's grants (default: all)")
    grants.set_defaults(operation=_list_grants)
    return parser


async def run(operation: Operation, args: argparse.Namespace, settings: GatewaySettings) -> dict[str, Any]:
    stores = SecurityStores(settings.postgres_url, schema=settings.db_schema)
    await stores.start()
    try:
        return await operation(stores, args)
    finally:
        await stores.close()


def exit_code_for(error: RagmeshError) -> int:
    if error.code in (ErrorCode.UNAVAILABLE, ErrorCode.DEADLINE_EXCEEDED):
        return EXIT_UNAVAILABLE
    return EXIT_USAGE if error.http_status < 500 else EXIT_FAIL


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    settings = GatewaySettings.from_env()
    if not settings.postgres_url:
        print("ragmesh: RAGMESH_POSTGRES_URL is not set (tokens and grants live in PostgreSQL)", file=sys.stderr)
        return EXIT_USAGE
    try:
        result = asyncio.run(run(args.operation, args, settings))
    except RagmeshError as exc:
        print(f"ragmesh: {exc.code.value}: {exc.message}", file=sys.stderr)
        return exit_code_for(exc)
    if "token" in result:
        print("ragmesh: the token is shown once and never stored; keep it now", file=sys.stderr)
    sys.stdout.write(json.dumps(result, ensure_ascii=False) + "\n")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
