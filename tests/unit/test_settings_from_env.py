"""ragmesh_common.settings.from_env: a settings Struct read field by field from its variables."""

import msgspec
import pytest

from ragmesh_common.settings import ListenSettings, from_env, listen_addr


class Example(ListenSettings, frozen=True):
    listen: str = "127.0.0.1:1"
    limit: int = 3
    ratio: float = 0.5
    strict: bool = False
    url: str = "http://x"
    stop: tuple[str, ...] = ("a",)
    nested: dict[str, int] = msgspec.field(default_factory=dict)


def test_each_field_reads_its_variable_or_keeps_its_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGMESH_EX_LIMIT", "7")
    monkeypatch.setenv("RAGMESH_EX_STRICT", "yes")
    monkeypatch.setenv("RAGMESH_OTHER_URL", "http://y")
    monkeypatch.setenv("RAGMESH_EX_URL", "http://not-read")
    monkeypatch.setenv("RAGMESH_EX_STOP", "b, c")
    read = from_env(Example, "RAGMESH_EX_", names={"url": "RAGMESH_OTHER_URL"}, listen="h:9", nested={"k": 1})
    assert read == Example(listen="h:9", limit=7, ratio=0.5, strict=True, url="http://y", stop=("b", "c"),
                           nested={"k": 1})
    assert (read.host, read.port) == ("h", 9)


def test_a_bad_value_stops_with_its_variable_and_an_unreadable_field_must_be_given(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGMESH_EX_RATIO", "half")
    with pytest.raises(SystemExit, match="RAGMESH_EX_RATIO"):
        from_env(Example, "RAGMESH_EX_", nested={})
    monkeypatch.delenv("RAGMESH_EX_RATIO")
    with pytest.raises(TypeError, match="nested"):
        from_env(Example, "RAGMESH_EX_")


def test_listen_addr_replaces_only_the_port(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGMESH_RERANK_ADDR", "0.0.0.0:6000")
    assert listen_addr("rerank") == "0.0.0.0:6000"
    assert listen_addr("rerank", 7000) == "0.0.0.0:7000"
