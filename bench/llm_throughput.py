"""Tokens per second of the runtime's llm profile (a GGUF model through llama.cpp), by thread count.

    .venv/bin/python bench/llm_throughput.py                  # SmolLM2-135M, 1 and 2 threads
    .venv/bin/python bench/llm_throughput.py --threads 1 --prompt-chars 3000 --max-tokens 64
    .venv/bin/python bench/llm_throughput.py --smoke          # tiny prompt, 4 tokens, 1 thread

One JSON line per thread count: prompt tokens read and their rate, tokens generated and their
rate (llama.cpp's own timings of the last of ``--runs`` runs), wall seconds, and the machine's load
average before and after. The prompt is the evidence protocol over docs/architecture.md, as the
generation service would send it; temperature 0, and llama.cpp's prompt cache off (``cache_prompt:
false``), so every run reads its whole prompt. ``--smoke`` fails when the engine's chunks
no longer carry the timings this reads.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from ragmesh_runtime.llm.engine import LlamaCppEngine
from ragmesh_runtime.llm.model_file import choose, verify_gguf
from ragmesh_runtime.settings import LlmSettings

ROOT = Path(__file__).resolve().parents[1]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", default="1,2", help="thread counts to measure, comma-separated")
    p.add_argument("--prompt-chars", type=int, default=5000, help="evidence characters in the prompt")
    p.add_argument("--max-tokens", type=int, default=100, help="tokens to generate")
    p.add_argument("--runs", type=int, default=2, help="runs per thread count (the last is reported)")
    p.add_argument("--smoke", action="store_true", help="a few seconds: fails when the engine's API changed")
    args = p.parse_args(argv)
    if args.smoke:
        args.threads, args.prompt_chars, args.max_tokens, args.runs = "1", 300, 4, 1
    return args


def measure(engine: LlamaCppEngine, evidence: str, max_tokens: int, run: int) -> dict:
    body = {"messages": [
        {"role": "system", "content": "Answer only from the evidence and cite it as [S1]."},
        {"role": "user", "content": f'<evidence>\n<source id="S1">\n{evidence}\n</source>\n</evidence>\n'
                                    f"<question>Run {run}: what does the indexer service own?</question>"}],
        "max_tokens": max_tokens, "temperature": 0, "cache_prompt": False, "stream_options": {"include_usage": True}}
    chunks: list[dict] = []
    started = time.perf_counter()
    engine.chat(body, lambda chunk: chunks.append(chunk) or False)
    wall = time.perf_counter() - started
    timings = next((c["timings"] for c in reversed(chunks) if "timings" in c), None)
    if timings is None:
        raise SystemExit(f"no timings in the engine's last chunk: the API changed ({chunks[-1:]})")
    return {"prompt_tokens": timings["prompt_n"], "prompt_tokens_per_s": round(timings["prompt_per_second"], 1),
            "generated_tokens": timings["predicted_n"],
            "generated_tokens_per_s": round(timings["predicted_per_second"], 1), "wall_s": round(wall, 2)}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    verified = verify_gguf(choose(LlmSettings()))
    evidence = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")[: args.prompt_chars]
    for threads in (int(t) for t in args.threads.split(",")):
        load_before = [round(x, 2) for x in os.getloadavg()]
        engine = LlamaCppEngine.load(verified.path, context_tokens=4096, threads=threads)
        try:
            for run in range(args.runs):
                figures = measure(engine, evidence, args.max_tokens, run)
        finally:
            engine.close()
        print(json.dumps({"bench": "llm_throughput", "model": verified.path.name, "engine": engine.name,
                          "threads": threads, **figures, "cpu_count": os.cpu_count(),
                          "load_average_before": load_before,
                          "load_average_after": [round(x, 2) for x in os.getloadavg()]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
