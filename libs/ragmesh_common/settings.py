"""Settings read from the environment: typed, each field naming its variable.

A service declares ``class Settings(msgspec.Struct)`` whose fields use :func:`env`; the module-level
cached getter builds it once. Required settings that are missing stop the process at start with a
message naming the variable, so a service never starts half-configured.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Mapping, TypeVar

import msgspec

T = TypeVar("T")
S = TypeVar("S", bound=msgspec.Struct)

# Fixed loopback ports of the embedded default (each overridable by its variable).
DEFAULT_PORTS = {
    "gateway": 8080,
    "runtime": 8091,
    "retrieval": 50051,
    "rerank": 50052,
    "generation": 50053,
    "indexer": 50054,
}
METRICS_PORTS = {"retrieval": 9101, "rerank": 9102, "generation": 9103, "indexer": 9104}


class MissingSetting(SystemExit):
    def __init__(self, variable: str, why: str = "") -> None:
        super().__init__(f"ragmesh: required setting {variable} is not set{': ' + why if why else ''}")
        self.variable = variable


def env_str(name: str, default: str | None = None, *, required: bool = False, why: str = "") -> str:
    value = os.environ.get(name)
    if value is None or value == "":
        value = _file_secret(name)
    if value is None or value == "":
        if required:
            raise MissingSetting(name, why)
        return default or ""
    return value


def _file_secret(name: str) -> str | None:
    """``NAME_FILE`` points at a file holding the value (Docker/Compose secrets)."""
    path = os.environ.get(f"{name}_FILE")
    if not path:
        return None
    try:
        return Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise SystemExit(f"ragmesh: cannot read {name}_FILE={path}: {exc.strerror}") from exc


def env_int(name: str, default: int) -> int:
    return _env_parsed(name, default, int)


def env_float(name: str, default: float) -> float:
    return _env_parsed(name, default, float)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    if raw.lower() in {"1", "true", "yes", "on"}:
        return True
    if raw.lower() in {"0", "false", "no", "off"}:
        return False
    raise SystemExit(f"ragmesh: {name}={raw!r} is not a boolean")


def env_list(name: str, default: list[str] | None = None) -> list[str]:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return list(default or [])
    return [item.strip() for item in raw.split(",") if item.strip()]


def _env_parsed(name: str, default: T, parse: Callable[[str], T]) -> T:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return parse(raw)
    except ValueError as exc:
        raise SystemExit(f"ragmesh: {name}={raw!r} is not a valid {parse.__name__}") from exc


def state_dir() -> Path:
    """Project-local state folder of the embedded default (Qdrant storage, caches, servers)."""
    path = Path(env_str("RAGMESH_STATE_DIR", ".ragmesh-state")).resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def addr(service: str) -> str:
    """host:port of a gRPC service, from RAGMESH_<SERVICE>_ADDR."""
    return env_str(f"RAGMESH_{service.upper()}_ADDR", f"127.0.0.1:{DEFAULT_PORTS[service]}")


def listen_addr(service: str, port: int | None = None) -> str:
    """host:port a gRPC service listens on: RAGMESH_<SERVICE>_ADDR, its port replaced by ``port``
    (the service's ``--port``) when given."""
    listen = addr(service)
    return listen if port is None else f"{listen.rsplit(':', 1)[0]}:{port}"


class ListenSettings(msgspec.Struct, frozen=True):
    """What a gRPC service's settings start with: where it listens (``host:port``)."""

    listen: str

    @property
    def host(self) -> str:
        return self.listen.rsplit(":", 1)[0]

    @property
    def port(self) -> int:
        return int(self.listen.rsplit(":", 1)[1])


_READERS: dict[Any, Callable[[str, Any], Any]] = {
    str: env_str,
    int: env_int,
    float: env_float,
    bool: env_bool,
    tuple[str, ...]: lambda name, default: tuple(env_list(name, list(default))),
    list[str]: env_list,
}


def from_env(cls: type[S], prefix: str, *, names: Mapping[str, str] | None = None, **given: Any) -> S:
    """``cls`` (a settings Struct) with every field read from its variable, so that a field is
    declared once: the variable is ``prefix`` + the field's name in capitals unless ``names`` names
    it, it is read by the field's type (str, int, float, bool, a tuple or list of str), and unset it
    is the field's default. Fields in ``given`` are taken as they are (values derived elsewhere)."""
    names = names or {}
    values: dict[str, Any] = {}
    for field in msgspec.structs.fields(cls):
        if field.name in given:
            values[field.name] = given[field.name]
            continue
        reader = _READERS.get(field.type)
        if reader is None:
            raise TypeError(f"{cls.__name__}.{field.name}: no environment reader for {field.type!r}; pass it")
        default = field.default if field.default is not msgspec.NODEFAULT else None
        values[field.name] = reader(names.get(field.name, prefix + field.name.upper()), default)
    return cls(**values)


def describe(settings: Any) -> dict[str, Any]:
    """Settings as a loggable dict, with secrets masked."""
    out = msgspec.to_builtins(settings)
    for key in list(out):
        if not out[key]:
            continue
        if key.endswith("_url") or key == "url":
            out[key] = _mask_url(str(out[key]))
        elif any(key.endswith(s) for s in ("password", "secret", "api_key", "_token", "token_hash")):
            out[key] = "***"
    return out


def _mask_url(url: str) -> str:
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        return f"{scheme}://***@{rest.split('@', 1)[1]}"
    return url
