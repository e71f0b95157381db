"""One default number of sources for an answer, wherever it is asked (issue 20, item 7).

The widget asked for 5 sources and the CLI for 8: "What does the generation service own?" got
three off-topic sentences in the widget and the right line from the CLI.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from ragmesh_cli.main import build_parser
from ragmesh_common.answer_defaults import ANSWER_SOURCES
from ragmesh_gateway.chat.schemas import ChatRequest
from ragmesh_gateway.chat.service import ChatService
from ragmesh_gateway.settings import GatewaySettings

WIDGET = Path(__file__).resolve().parents[2] / "services" / "gateway" / "ragmesh_gateway" / "widget" / "widget.js"


def test_the_cli_answers_from_as_many_sources_as_the_gateway_default() -> None:
    args = build_parser().parse_args(["answer", "What does the generation service own?"])
    assert args.top_k == GatewaySettings().chat_top_k == ANSWER_SOURCES


def test_the_gateway_default_reads_the_shared_constant(monkeypatch) -> None:
    monkeypatch.delenv("RAGMESH_CHAT_TOP_K", raising=False)
    assert GatewaySettings.from_env().chat_top_k == ANSWER_SOURCES
    assert inspect.signature(ChatService.__init__).parameters["default_top_k"].default == ANSWER_SOURCES


def test_widget_mcp_and_openai_route_send_no_top_k_of_their_own() -> None:
    # The widget sends top_k only from its top-k attribute; MCP takes ChatRequest, whose top_k is
    # None unless the caller sets it; the OpenAI route builds ChatParams without one.
    assert ChatRequest(question="q").top_k is None
    assert re.search(r"if \(topK > 0\) body\.top_k = topK;", WIDGET.read_text(encoding="utf-8"))
