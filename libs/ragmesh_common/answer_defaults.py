"""Defaults every way of asking for an answer shares.

The widget, the CLI's ``answer``, the MCP tool and the OpenAI-compatible route ground an answer on
this many sources unless the caller sets ``top_k``: with different defaults the same question
got different evidence, and different answers, depending on where it was asked (issue 20). The
widget and the MCP and OpenAI routes send no ``top_k`` of their own, so the gateway's default
(``RAGMESH_CHAT_TOP_K``, this by default) is theirs; the CLI sends this one.
"""

from __future__ import annotations

ANSWER_SOURCES = 6
