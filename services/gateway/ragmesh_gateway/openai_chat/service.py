"""OpenAI chat requests onto the chat application service: the same search, generator, citation
checks, ACL and session rules as /chat. Models are "ragmesh" (every corpus the caller may read)
and "ragmesh/<corpus>" (that corpus); a corpus the caller may not read is a model that does not
exist. The conversation comes in the messages, so nothing is kept in session memory.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from ragmesh_common.errors import ErrorCode, RagmeshError

from ragmesh_gateway.access.ports import Caller
from ragmesh_gateway.chat.conversation import without_citation_markers
from ragmesh_gateway.chat.service import ChatParams, ChatService, ChatSession
from ragmesh_gateway.openai_chat.annotations import markers_of_links
from ragmesh_gateway.openai_chat.schemas import ChatCompletionRequest, ChatMessage
from ragmesh_gateway.search.models import Filters
from ragmesh_gateway.search.schemas import QUERY_MAX_CHARS
from ragmesh_gateway.sessions.ports import Turn

ALL_CORPORA = "ragmesh"
MAX_TOKENS = 4096
# Values of refused options that ask for nothing (clients send some of them by default).
NEUTRAL_VALUES: dict[str, tuple[Any, ...]] = {
    "n": (None, 1),
    "tools": (None, []),
    "tool_choice": (None, "none", "auto"),
    "functions": (None, []),
    "function_call": (None, "none", "auto"),
    "logprobs": (None, False),
    "top_logprobs": (None, 0),
    "logit_bias": (None, {}),
    "stop": (None, [], ""),
    "modalities": (None, ["text"]),
    "audio": (None,),
    "prediction": (None,),
    "web_search_options": (None,),
}
REFUSAL_REASONS = {
    "n": "n must be 1: there is one grounded answer",
    "tools": "tools are not supported: ragmesh answers from documents and calls no tools",
    "tool_choice": "tool_choice must be none or auto: ragmesh calls no tools",
    "functions": "functions are not supported: ragmesh calls no functions",
    "function_call": "function_call must be none or auto: ragmesh calls no functions",
    "logprobs": "logprobs are not available for grounded answers",
    "top_logprobs": "logprobs are not available for grounded answers",
    "logit_bias": "logit_bias is not supported",
    "stop": "stop sequences are not supported: an answer ends where its citations end",
    "modalities": "only the text modality is supported",
    "audio": "audio output is not supported",
    "prediction": "predicted outputs are not supported",
    "web_search_options": "web search is not supported: answers come from the indexed documents only",
}


def invalid(message: str, param: str, code: ErrorCode = ErrorCode.INVALID_ARGUMENT) -> RagmeshError:
    return RagmeshError(code, message, {"param": param})


def model_not_found(model: str) -> RagmeshError:
    # OpenAI's own wording, for a corpus that is not there and one the caller may not read alike.
    return RagmeshError(ErrorCode.NOT_FOUND, f"The model `{model}` does not exist or you do not have access to it.",
                        {"param": "model", "openai_code": "model_not_found"})


@dataclass(frozen=True, slots=True)
class CompletionPlan:
    model: str
    params: ChatParams
    stream: bool
    include_usage: bool
    prompt_words: int


def words(text: str) -> int:
    return len(text.split())


class OpenAiChatService:
    def __init__(self, chat: ChatService, *, max_history_turns: int = 20) -> None:
        self._chat = chat
        self._max_history_turns = max_history_turns
        self.started_at = int(time.time())

    def models(self, caller: Caller) -> list[str]:
        return [ALL_CORPORA, *(f"{ALL_CORPORA}/{corpus}" for corpus in sorted(caller.readable_corpora))]

    def filters_for(self, model: str, caller: Caller) -> Filters:
        if model == ALL_CORPORA:
            return Filters()
        prefix, _, corpus = model.partition("/")
        if prefix != ALL_CORPORA or not corpus or not caller.can_read(corpus):
            raise model_not_found(model)
        return Filters(corpora=(corpus,))

    def plan(self, request: ChatCompletionRequest, caller: Caller) -> CompletionPlan:
        """Everything the request can be refused for, before any work is done."""
        for field, neutral in NEUTRAL_VALUES.items():
            if getattr(request, field) not in neutral:
                raise invalid(REFUSAL_REASONS[field], field)
        response_format = request.response_format
        if response_format is not None and response_format.get("type", "text") != "text":
            raise invalid("response_format must be text: answers are prose with [S1] citations", "response_format")
        limit = request.max_completion_tokens if request.max_completion_tokens is not None else request.max_tokens
        if limit is not None and not 1 <= limit <= MAX_TOKENS:
            field = "max_completion_tokens" if request.max_completion_tokens is not None else "max_tokens"
            raise invalid(f"{field} must be between 1 and {MAX_TOKENS}", field)
        filters = self.filters_for(request.model, caller)
        question, history = self._conversation(request.messages)
        options = request.stream_options
        return CompletionPlan(
            model=request.model,
            params=ChatParams(question=question, filters=filters, max_tokens=limit, history=tuple(history)),
            stream=bool(request.stream),
            include_usage=bool(request.stream and options and options.include_usage),
            prompt_words=sum(words(turn.content) for turn in history) + words(question),
        )

    def _conversation(self, messages: list[ChatMessage]) -> tuple[str, list[Turn]]:
        if not messages:
            raise invalid("messages must hold at least one user message", "messages")
        turns: list[Turn] = []
        for message in messages:
            if message.role in ("tool", "function") or message.tool_calls or message.function_call:
                raise invalid("tool and function messages are not supported: ragmesh calls no tools", "messages")
            text = _text_of(message)
            if message.role in ("system", "developer"):
                continue  # no instructions: the grounding rules are ragmesh's own
            turns.append(Turn(message.role, text))
        if not turns or turns[-1].role != "user":
            raise invalid("the last message must be the user's question", "messages")
        question = turns[-1].content.strip()
        if not question:
            raise invalid("the question is empty", "messages", ErrorCode.QUERY_EMPTY)
        if len(question) > QUERY_MAX_CHARS:
            raise invalid(f"the question is over {QUERY_MAX_CHARS} characters", "messages", ErrorCode.QUERY_TOO_LONG)
        # An earlier answer comes back with its citations as links [S1](url): they named *its* sources.
        history = [Turn(t.role, without_citation_markers(markers_of_links(t.content)) if t.role == "assistant"
                        else t.content.strip()) for t in turns[:-1]]
        return question, [t for t in history if t.content][-self._max_history_turns:]

    async def open(self, plan: CompletionPlan, caller: Caller) -> ChatSession:
        return await self._chat.open(plan.params, caller)


def _text_of(message: ChatMessage) -> str:
    if message.content is None or isinstance(message.content, str):
        return message.content or ""
    texts = []
    for part in message.content:
        if part.type == "text" and part.text is not None:
            texts.append(part.text)
        elif part.type == "refusal" and message.role == "assistant":
            texts.append(part.refusal or "")
        else:
            raise invalid(f"content parts of type {part.type!r} are not supported: ragmesh answers text "
                          "questions (no images, audio or files)", "messages")
    return "\n".join(texts)
