"""What each ragmesh process reads from its environment, found statically in its code.

A process is the module Compose runs (``python -m ragmesh_gateway``, ``ragmesh index ci``) and every
ragmesh module it imports, directly or not, lazily inside a function or at the top. In those modules
a *read* is a call of the settings helpers or of ``os.environ`` with a literal name (or a module
constant holding one):

    env_str("RAGMESH_X", ...)   env_int / env_float / env_bool / env_list("RAGMESH_X", ...)
    os.environ.get("RAGMESH_X")   os.getenv("RAGMESH_X")   os.environ["RAGMESH_X"]
    addr("retrieval")           -> RAGMESH_RETRIEVAL_ADDR (ragmesh_common.settings.addr; listen_addr too)
    from_env(cls, "RAGMESH_X_", names={...}, given=...) -> RAGMESH_X_<FIELD> for each field of the
                                   class the call sits in (ragmesh_common.settings.from_env)

``env_str`` also reads ``<NAME>_FILE`` (a secret file). A read is *required* when it passes
``required=True`` or when the code raises ``MissingSetting("RAGMESH_X", ...)``; every other helper
call has a default by its signature. Names built at run time (``f"RAGMESH_{name}_ADDR"``) are not
reads here; ``addr`` is the one such helper and is handled by name.

Shared by tests/contract/test_compose_code_env.py.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCE_ROOTS = (
    ROOT / "libs",
    *(ROOT / "services" / name for name in ("gateway", "retrieval", "rerank", "generation", "indexer")),
)
# The module each Compose service runs (its image CMD, or the entrypoint of the index job).
ENTRY_MODULES = {
    "gateway": "ragmesh_gateway.__main__",
    "retrieval": "ragmesh_retrieval.__main__",
    "rerank": "ragmesh_rerank.__main__",
    "generation": "ragmesh_generation.__main__",
    "indexer": "ragmesh_indexer.__main__",
    "runtime": "ragmesh_runtime.__main__",
    "index-job": "ragmesh_cli.main",
}
ENV_HELPERS = frozenset({"env_str", "env_int", "env_float", "env_bool", "env_list"})
FILE_AWARE_HELPERS = frozenset({"env_str"})


@dataclass
class EnvReads:
    """Variables one process reads: every name, the required ones, and where each is read."""

    names: set[str] = field(default_factory=set)
    required: set[str] = field(default_factory=set)
    where: dict[str, set[str]] = field(default_factory=dict)

    def add(self, name: str, module: str, *, required: bool = False) -> None:
        self.names.add(name)
        self.where.setdefault(name, set()).add(module)
        if required:
            self.required.add(name)

    def merge(self, other: EnvReads) -> None:
        self.names |= other.names
        self.required |= other.required
        for name, modules in other.where.items():
            self.where.setdefault(name, set()).update(modules)


def module_path(dotted: str) -> Path | None:
    """The source file of a ragmesh module, or None when it is not ours (or does not exist)."""
    parts = dotted.split(".")
    if not parts[0].startswith("ragmesh_"):
        return None
    for root in SOURCE_ROOTS:
        base = root.joinpath(*parts)
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


def _parse(dotted: str) -> ast.Module:
    path = module_path(dotted)
    assert path is not None, dotted
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _is_package(dotted: str) -> bool:
    path = module_path(dotted)
    return path is not None and path.name == "__init__.py"


def imported_modules(dotted: str) -> set[str]:
    """ragmesh modules this one imports anywhere in its body (parents included: importing runs them)."""
    found: set[str] = set()
    package = dotted if _is_package(dotted) else dotted.rpartition(".")[0]
    for node in ast.walk(_parse(dotted)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            # `from pkg import name` imports pkg.name when that is a module, else an attribute of pkg.
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            parts = target.split(".")
            for end in range(1, len(parts) + 1):
                candidate = ".".join(parts[:end])
                if module_path(candidate) is not None:
                    found.add(candidate)
    found.discard(dotted)
    return found


@functools.cache
def import_closure(entry: str) -> frozenset[str]:
    seen: set[str] = set()
    todo = [entry]
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        todo.extend(imported_modules(module) - seen)
    return frozenset(seen)


def _string_constants(tree: ast.Module) -> dict[str, str]:
    constants = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            constants[node.targets[0].id] = node.value.value
    return constants


def _callee(call: ast.Call) -> str:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        owner = func.value
        if isinstance(owner, ast.Attribute) and owner.attr == "environ" and func.attr == "get":
            return "os.environ.get"
        if isinstance(owner, ast.Name) and owner.id == "os" and func.attr == "getenv":
            return "os.getenv"
        return func.attr
    return ""


def _is_environ(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ"


def module_reads(dotted: str) -> EnvReads:
    tree = _parse(dotted)
    constants = _string_constants(tree)
    reads = EnvReads()

    def name_of(node: ast.AST | None) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            value = node.value
        elif isinstance(node, ast.Name) and node.id in constants:
            value = constants[node.id]
        else:
            return None
        return value if value.startswith("RAGMESH_") else None

    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and _is_environ(node.value) and isinstance(node.ctx, ast.Load):
            if name := name_of(node.slice):
                reads.add(name, dotted, required=True)
            continue
        if not isinstance(node, ast.Call):
            continue
        callee = _callee(node)
        first = node.args[0] if node.args else None
        if callee in ENV_HELPERS or callee in ("os.environ.get", "os.getenv"):
            name = name_of(first)
            if name is None:
                continue
            required = any(
                kw.arg == "required" and isinstance(kw.value, ast.Constant) and kw.value.value is True
                for kw in node.keywords
            )
            reads.add(name, dotted, required=required)
            if callee in FILE_AWARE_HELPERS:
                reads.add(f"{name}_FILE", dotted)
        elif callee == "from_env" and len(node.args) >= 2 and (prefix := name_of(node.args[1])):
            for name, typed in _from_env_reads(tree, node, prefix):
                reads.add(name, dotted)
                if typed == "str":
                    reads.add(f"{name}_FILE", dotted)
        elif callee in ("addr", "listen_addr") and isinstance(first, ast.Constant) and isinstance(first.value, str):
            name = f"RAGMESH_{first.value.upper()}_ADDR"
            reads.add(name, dotted)
            reads.add(f"{name}_FILE", dotted)
        elif callee == "MissingSetting" and (name := name_of(first)):
            reads.add(name, dotted, required=True)
    return reads


def _from_env_reads(tree: ast.Module, call: ast.Call, prefix: str) -> list[tuple[str, str]]:
    """(variable, annotated type) for each field ``from_env(cls, prefix, names=..., **given)`` reads:
    the fields of the class whose method holds the call, its bases' first (found in this module or
    the ragmesh module it imports them from), less those given."""
    holder = next(node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)
                  and any(inner is call for inner in ast.walk(node)))
    names: dict[str, str] = {}
    given: set[str] = set()
    for keyword in call.keywords:
        if keyword.arg == "names" and isinstance(keyword.value, ast.Dict):
            names = {k.value: v.value for k, v in zip(keyword.value.keys, keyword.value.values)
                     if isinstance(k, ast.Constant) and isinstance(v, ast.Constant)}
        elif keyword.arg is not None:
            given.add(keyword.arg)
    return [(names.get(field, prefix + field.upper()), typed)
            for field, typed in _struct_fields(tree, holder) if field not in given]


def _struct_fields(tree: ast.Module, cls: ast.ClassDef) -> list[tuple[str, str]]:
    fields: list[tuple[str, str]] = []
    for base in cls.bases:
        if isinstance(base, ast.Name):
            fields += _named_class_fields(tree, base.id)
    for item in cls.body:
        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            fields.append((item.target.id, ast.unparse(item.annotation)))
    return fields


def _named_class_fields(tree: ast.Module, name: str) -> list[tuple[str, str]]:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return _struct_fields(tree, node)
        if isinstance(node, ast.ImportFrom) and node.module and module_path(node.module) is not None and any(
                alias.name == name for alias in node.names):
            return _named_class_fields(_parse(node.module), name)
    return []


@functools.cache
def process_reads(service: str) -> EnvReads:
    """Everything the process Compose runs for ``service`` reads."""
    reads = EnvReads()
    for module in sorted(import_closure(ENTRY_MODULES[service])):
        reads.merge(module_reads(module))
    return reads


def all_reads() -> set[str]:
    return set().union(*(process_reads(service).names for service in ENTRY_MODULES))
