"""The composition root picks the chat adapters from settings (nothing connects at build time)."""

from __future__ import annotations

import pytest

from ragmesh_common.settings import MissingSetting

from ragmesh_gateway.composition import build_deps
from ragmesh_gateway.feedback.ports import NoFeedbackStorage
from ragmesh_gateway.feedback.store import PostgresFeedback
from ragmesh_gateway.sessions.condense import RuleCondenser
from ragmesh_gateway.sessions.llm_condenser import LlmCondenser
from ragmesh_gateway.sessions.ports import NoSessionMemory, StandaloneQuestions
from ragmesh_gateway.sessions.redis_memory import RedisSessionMemory
from ragmesh_gateway.settings import GatewaySettings


def test_defaults_without_stores() -> None:
    deps = build_deps(GatewaySettings())
    assert isinstance(deps.session_memory, NoSessionMemory)
    assert isinstance(deps.condenser, RuleCondenser)
    assert isinstance(deps.feedback_sink, NoFeedbackStorage)


def test_redis_and_postgres_urls_switch_on_memory_and_feedback_without_connecting() -> None:
    deps = build_deps(GatewaySettings(redis_url="redis://127.0.0.1:1/0", postgres_url="postgresql://db/x"))
    assert isinstance(deps.session_memory, RedisSessionMemory)
    assert isinstance(deps.feedback_sink, PostgresFeedback)
    assert deps.on_start == []  # feedback storage opens on first use; PostgreSQL down must not stop start-up


def test_condenser_choice() -> None:
    assert isinstance(build_deps(GatewaySettings(chat_condenser="off")).condenser, StandaloneQuestions)
    llm = build_deps(GatewaySettings(chat_condenser="llm", llm_url="http://127.0.0.1:1/v1"))
    assert isinstance(llm.condenser, LlmCondenser)
    with pytest.raises(MissingSetting):
        build_deps(GatewaySettings(chat_condenser="llm"))


def test_unknown_condenser_in_the_environment_stops_start_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGMESH_CHAT_CONDENSER", "magic")
    with pytest.raises(SystemExit, match="RAGMESH_CHAT_CONDENSER"):
        GatewaySettings.from_env()
