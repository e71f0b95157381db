"""llama.cpp's server, in-process, through xllamacpp: OpenAI-shaped chat chunks from a GGUF file.

``xllamacpp.Server`` runs llama.cpp's own server loop (chat template, sampling, stop strings,
end-of-turn tokens, usage) on a thread of its own; ``handle_chat_completions`` blocks the calling
thread without the GIL and hands each streamed chunk to a callback, which may end the generation
by returning True. That callback is the only way to stop it, so the engine is always driven in
streaming mode (the non-streamed response is assembled above it).

Two things llama.cpp does that a library in our process must not: it also listens on a random
loopback port with its own HTTP API, and it installs SIGINT/SIGTERM handlers. The listener gets
a random API key nobody knows and its optional endpoints off; the process's signal handlers are
put back after the load, so uvicorn still drains and stops the runtime on SIGTERM.
"""

from __future__ import annotations

import secrets
import signal
import threading
from pathlib import Path
from typing import Any, Callable

from ragmesh_runtime.model_files import ModelIntegrityError

# A callback gets each chunk (a dict) and returns True to end the generation.
ChunkCallback = Callable[[dict[str, Any]], bool]


class LlamaCppEngine:
    def __init__(self, server: Any, *, context_tokens: int, threads: int, version: str) -> None:
        self._server = server
        self.context_tokens = context_tokens
        self.threads = threads
        self.name = f"llama.cpp via xllamacpp {version} (CPU)"

    @classmethod
    def load(cls, path: Path, *, context_tokens: int, threads: int) -> LlamaCppEngine:
        import xllamacpp

        params = xllamacpp.CommonParams()
        params.model.path = str(path)
        params.n_ctx = context_tokens
        params.n_parallel = 1  # one generation at a time; requests queue in the runtime
        params.cpuparams.n_threads = threads
        params.cpuparams_batch.n_threads = threads
        params.verbosity = -1  # quiet: the runtime logs its own JSON lines
        params.api_keys = [secrets.token_urlsafe(32)]
        params.ui = False
        params.endpoint_slots = False
        params.endpoint_props = False
        params.endpoint_metrics = False
        handlers = _signal_handlers()
        try:
            server = xllamacpp.Server(params)
        except RuntimeError as exc:
            raise ModelIntegrityError(f"llm model {path}: llama.cpp could not load it ({exc}); refusing to start") \
                from None
        finally:
            _restore(handlers)
        return cls(server, context_tokens=context_tokens, threads=threads, version=xllamacpp.__version__)

    def chat(self, body: dict[str, Any], on_chunk: ChunkCallback) -> None:
        """Run one streamed chat completion to its end (or until ``on_chunk`` returns True)."""
        server = self._server
        if server is None:
            raise RuntimeError("the llama.cpp engine is closed")
        server.handle_chat_completions({**body, "stream": True}, on_chunk)

    def close(self) -> None:
        """Stop llama.cpp's loop thread (the Server's destructor joins it)."""
        self._server = None


def _signal_handlers() -> dict[int, Any]:
    return {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}


def _restore(handlers: dict[int, Any]) -> None:
    if threading.current_thread() is not threading.main_thread():
        return  # only the main thread may set handlers, and llama.cpp's then stay (tests, benches)
    for sig, handler in handlers.items():
        if handler is not None:
            signal.signal(sig, handler)
