"""Helpers for the runtime's chat tests: the evidence protocol and server-sent event parsing."""

from __future__ import annotations

import html
import json


def evidence_message(sources: list[tuple[str, str]], question: str) -> str:
    """The last user message in the generation service's evidence protocol."""
    blocks = "\n".join(
        f'<source id="{sid}" title="doc {sid}" heading="Intro &gt; Details">\n'
        f"{html.escape(text, quote=False)}\n</source>"
        for sid, text in sources
    )
    return f"<evidence>\n{blocks}\n</evidence>\n<question>{html.escape(question, quote=False)}</question>"


def chat_body(sources: list[tuple[str, str]], question: str, **extra) -> dict:
    return {
        "model": "ragmesh-extractive-v1-not-an-llm",
        "messages": [
            {"role": "system", "content": "Answer only from the evidence."},
            {"role": "user", "content": evidence_message(sources, question)},
        ],
        **extra,
    }


def parse_sse(raw: str) -> list[dict | str]:
    """The data payloads of a server-sent event stream, JSON-decoded except the [DONE] sentinel."""
    events: list[dict | str] = []
    for block in raw.split("\n\n"):
        if not block.strip():
            continue
        lines = block.split("\n")
        assert all(line.startswith("data: ") for line in lines), block
        payload = "\n".join(line[len("data: ") :] for line in lines)
        events.append(payload if payload == "[DONE]" else json.loads(payload))
    return events
