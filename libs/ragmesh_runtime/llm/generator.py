"""The llm profile's ChatGenerator: one generation at a time on its own thread, always bounded.

Every generation ends: at the model's end of turn or a ``stop`` string ("stop"), at max_tokens
("length"), or at the wall-clock cap ("time_limit", also when the model has not sent a token by
then: reading a long prompt counts). A prompt that does not fit the context is a 400
(QUERY_TOO_LONG, type ``exceed_context_size_error``, as llama.cpp's own server names it) before
any byte of the response. A client that goes away stops the generation at its next token.

The engine runs on a thread of its own, not the embedding thread: a 10-second answer must not
hold up /embed and /rerank. Requests beyond the one generating wait their turn, up to
``max_queued`` of them; more get 429.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, AsyncIterator, Sequence

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_runtime.chat import ChatEvent, ChatFinish, ChatGenerator, ChatOptions
from ragmesh_runtime.generator.prompt_protocol import ChatTurn
from ragmesh_runtime.llm.engine import LlamaCppEngine
from ragmesh_runtime.llm.model_file import GgufChoice, choose, verify_gguf
from ragmesh_runtime.model_files import VerifiedFile
from ragmesh_runtime.settings import LlmSettings, RuntimeSettings

log = logging.getLogger("ragmesh_runtime")

CONTEXT_OVERFLOW_TYPE = "exceed_context_size_error"
_END = object()  # the engine thread returned


class LlmChatGenerator(ChatGenerator):
    def __init__(self, engine: Any, settings: LlmSettings, choice: GgufChoice, verified: VerifiedFile,
                 max_prompt_chars: int, load_seconds: float = 0.0) -> None:
        self.engine = engine
        self.settings = settings
        self.choice = choice
        self.file = verified
        self.model_id = choice.model_id
        self.max_model_len = engine.context_tokens
        self.load_seconds = load_seconds
        self._max_prompt_chars = max_prompt_chars
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ragmesh-llm")
        self._waiting = 0
        self._runs: set[_Generation] = set()  # started, not yet ended: stopped by close()

    @classmethod
    def load(cls, settings: RuntimeSettings) -> LlmChatGenerator:
        started = time.perf_counter()
        llm = settings.llm
        choice = choose(llm)
        verified = verify_gguf(choice)
        engine = LlamaCppEngine.load(verified.path, context_tokens=llm.context_tokens, threads=llm.threads)
        seconds = time.perf_counter() - started
        log.info("llm model loaded: %s sha256=%s in %.2fs", verified.path.name, verified.sha256, seconds)
        return cls(engine, llm, choice, verified, settings.generator.max_prompt_chars, seconds)

    # -- the port -----------------------------------------------------------------------------
    async def complete(self, turns: Sequence[ChatTurn], options: ChatOptions) -> AsyncIterator[ChatEvent]:
        prompt_chars = sum(len(turn.content) for turn in turns)
        if prompt_chars > self._max_prompt_chars:
            raise RagmeshError(ErrorCode.BODY_TOO_LARGE,
                               f"messages hold {prompt_chars} characters; at most {self._max_prompt_chars}")
        if self._waiting >= self.settings.max_queued:
            raise RagmeshError(ErrorCode.RATE_LIMITED, "Model is overloaded")
        run = _Generation(self.settings.max_seconds)
        loop = asyncio.get_running_loop()
        try:
            loop.run_in_executor(self._pool, self._generate, self._body(turns, options), run, loop)
        except RuntimeError:  # the pool shut down: the process is stopping
            raise RagmeshError(ErrorCode.UNAVAILABLE, "runtime is shutting down") from None
        self._waiting += 1
        run.queued = True
        self._runs.add(run)
        try:
            async for event in self._events(run):
                yield event
        finally:
            run.stop.set()  # a client that left, or an error: the engine stops at its next token
            self._leave_queue(run)
            self._runs.discard(run)

    def _leave_queue(self, run: _Generation) -> None:
        if run.queued:
            run.queued = False
            self._waiting -= 1

    def describe(self) -> dict[str, object]:
        pin = self.choice.pin
        return {
            "profile": "llm",
            "model_id": self.model_id,
            "description": (
                f"a language model: {self.file.path.name} run by {self.engine.name}, one generation at a time "
                f"({self.engine.threads} thread{'s' if self.engine.threads != 1 else ''}); its answers are "
                "checked by the generation service like any model's"
            ),
            "engine": self.engine.name,
            "gguf_file": self.file.path.name,
            "gguf_path": str(self.file.path),
            "sha256": self.file.sha256,
            "sha256_verified": True,
            "size_bytes": self.file.size_bytes,
            "package": self.file.distribution,
            "package_version": self.file.distribution_version,
            "licence": pin.licence if pin else "stated by the operator, not by a package",
            "source": pin.source if pin else "an operator's own file",
            "context_tokens": self.engine.context_tokens,
            "trained_context_tokens": pin.trained_context if pin else None,
            # llama.cpp ends a turn on the model's end-of-generation tokens itself; `stop` strings
            # of a request are honoured as well (and are not part of the text).
            "stop_sequences": [pin.end_of_turn] if pin else [],
            "request_stop_honoured": True,
            "chat_template": "the GGUF file's own (tokenizer.chat_template), applied by llama.cpp's jinja engine",
            "default_max_tokens": self.settings.max_tokens,
            "max_seconds": self.settings.max_seconds,
            "threads": self.engine.threads,
            "max_queued": self.settings.max_queued,
            "finish_reasons": {
                "stop": "the model ended its turn or produced a stop string",
                "length": "max_tokens (or the context) was reached",
                "time_limit": f"the {self.settings.max_seconds:g} s wall-clock cap of one generation",
            },
            "load_seconds": round(self.load_seconds, 3),
        }

    def card(self) -> dict[str, object]:
        return {
            "root": str(self.file.path),
            "ragmesh": {
                "engine": self.engine.name,
                "gguf_file": self.file.path.name,
                "sha256": self.file.sha256,
                "package": self.file.distribution,
                "context_tokens": self.engine.context_tokens,
                "stop_sequences": [self.choice.pin.end_of_turn] if self.choice.pin else [],
            },
        }

    def close(self) -> None:
        """Stop what runs at its next token (a prompt being read is read to its end), then the engine."""
        for run in list(self._runs):
            run.stop.set()
        self._pool.shutdown(wait=True, cancel_futures=True)
        self.engine.close()

    # -- inside ---------------------------------------------------------------------------------
    def _body(self, turns: Sequence[ChatTurn], options: ChatOptions) -> dict[str, Any]:
        limit = self.settings.max_tokens
        if options.max_tokens is not None:
            limit = min(options.max_tokens, limit)
        body: dict[str, Any] = {
            "messages": [{"role": turn.role, "content": turn.content} for turn in turns],
            "max_tokens": limit,
            "stream_options": {"include_usage": True},
        }
        for name in ("temperature", "top_p", "seed"):
            value = getattr(options, name)
            if value is not None:
                body[name] = value
        if options.stop:
            body["stop"] = list(options.stop)
        return body

    def _generate(self, body: dict[str, Any], run: _Generation, loop: asyncio.AbstractEventLoop) -> None:
        """On the engine thread: feed every chunk to the event loop until the engine returns."""
        if run.stop.is_set():  # its client left while it waited
            return
        run.begin()
        loop.call_soon_threadsafe(run.started.set)

        def on_chunk(chunk: dict[str, Any]) -> bool:
            run.put(loop, chunk)
            return run.stop.is_set() or run.past_deadline()

        try:
            self.engine.chat(body, on_chunk)
        except Exception as exc:  # noqa: BLE001 - reported to the waiting request, not lost here
            run.put(loop, exc)
        finally:
            run.put(loop, _END)

    async def _events(self, run: _Generation) -> AsyncIterator[ChatEvent]:
        await run.started.wait()
        self._leave_queue(run)
        prompt_tokens = completion_tokens = 0
        reason: str | None = None
        sent = 0
        while True:
            remaining = run.deadline - time.monotonic()
            try:
                item = await asyncio.wait_for(run.queue.get(), timeout=max(remaining, 0.0))
            except TimeoutError:
                run.stop.set()
                reason = "time_limit"
                break
            if item is _END:
                break
            if isinstance(item, Exception):
                log.error("llm engine failed: %s", type(item).__name__)
                if not sent:
                    raise RagmeshError(ErrorCode.RUNTIME_ERROR, "Inference failed")
                reason = "error"
                break
            if "error" in item:
                if sent:
                    reason = "error"
                    break
                raise _engine_error(item["error"])
            usage = item.get("usage")
            if usage:
                prompt_tokens = int(usage.get("prompt_tokens", 0))
                completion_tokens = int(usage.get("completion_tokens", 0))
            for choice in item.get("choices") or ():
                text = (choice.get("delta") or {}).get("content")
                if text:
                    sent += 1
                    yield text
                reason = choice.get("finish_reason") or reason
        if run.past_deadline() and reason != "stop":
            reason = "time_limit"
        yield ChatFinish(reason or "stop", prompt_tokens, completion_tokens or sent)


class _Generation:
    """One request's handoff between the engine thread and the event loop."""

    def __init__(self, max_seconds: float) -> None:
        self.max_seconds = max_seconds
        self.queue: asyncio.Queue = asyncio.Queue()
        self.started = asyncio.Event()
        self.stop = threading.Event()
        self.deadline = float("inf")
        self.queued = False  # counted among the requests waiting for the engine (event loop side)

    def begin(self) -> None:
        self.deadline = time.monotonic() + self.max_seconds

    def past_deadline(self) -> bool:
        return time.monotonic() >= self.deadline

    def put(self, loop: asyncio.AbstractEventLoop, item: object) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody is waiting any more
            loop.call_soon_threadsafe(self.queue.put_nowait, item)


def _engine_error(error: dict[str, Any]) -> RagmeshError:
    message = str(error.get("message") or "the model rejected the request")
    if error.get("type") == CONTEXT_OVERFLOW_TYPE:
        n_prompt, n_ctx = error.get("n_prompt_tokens"), error.get("n_ctx")
        return RagmeshError(
            ErrorCode.QUERY_TOO_LONG,
            f"the prompt is {n_prompt} tokens; this model's context holds {n_ctx} (prompt and answer)",
            details={"openai_type": CONTEXT_OVERFLOW_TYPE, "n_prompt_tokens": n_prompt, "n_ctx": n_ctx},
        )
    if int(error.get("code") or 500) == 400:
        return RagmeshError(ErrorCode.INVALID_ARGUMENT, message)
    return RagmeshError(ErrorCode.RUNTIME_ERROR, "Inference failed")
