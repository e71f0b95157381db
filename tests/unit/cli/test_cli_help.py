"""Every `ragmesh` subcommand and every option says what it is for in `--help`, down to the gateway
admin's own parser that `ragmesh token` and `ragmesh access` hand their arguments to."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys

import pytest

from ragmesh_cli.main import build_parser


def walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(command path, parser) for the parser and every subparser under it."""
    yield path, parser
    for action in parser._actions:  # noqa: SLF001 - argparse has no public walk
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            for name, sub in action.choices.items():
                yield from walk(sub, (*path, name))


def missing_help(parser: argparse.ArgumentParser) -> list[str]:
    missing = []
    for path, p in walk(parser):
        for action in p._actions:  # noqa: SLF001
            if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
                described = {choice.dest: choice.help for choice in action._choices_actions}  # noqa: SLF001
                missing += [" ".join((*path, name)) for name in action.choices if not (described.get(name) or "").strip()]
            elif not isinstance(action, argparse._HelpAction) and not (action.help or "").strip():  # noqa: SLF001
                missing.append(f"{' '.join(path) or 'ragmesh'} {'/'.join(action.option_strings) or action.dest}")
    return missing


def test_the_walk_reaches_every_level() -> None:
    # Guards the next tests against a walk that finds nothing.
    paths = {path for path, _ in walk(build_parser())}
    assert {("index",), ("index", "status"), ("corpus", "add"), ("up",), ("token",)} <= paths


def test_every_subcommand_and_option_of_ragmesh_has_a_help_text() -> None:
    assert missing_help(build_parser()) == []


def test_every_admin_subcommand_and_option_has_a_help_text() -> None:
    admin = pytest.importorskip("ragmesh_gateway.admin.__main__")
    assert missing_help(admin.build_parser()) == []


@pytest.mark.parametrize("command", [(), ("index",), ("corpus",)])
def test_group_help_lists_each_subcommand_with_what_it_does(command: tuple[str, ...]) -> None:
    # `ragmesh index --help` used to describe build, ci and diff only; the others were just names
    # in the {...} list.
    done = subprocess.run([sys.executable, "-m", "ragmesh_cli.main", *command, "--help"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    (group,) = [a for a in dict(walk(build_parser()))[command]._actions  # noqa: SLF001
                if isinstance(a, argparse._SubParsersAction)]  # noqa: SLF001
    for name in group.choices:
        assert re.search(rf"^    {name}\s+\w", done.stdout, re.M), f"{name} has no description:\n{done.stdout}"
