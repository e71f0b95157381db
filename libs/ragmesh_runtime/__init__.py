"""ragmesh_runtime: the CPU model runtime.

One HTTP process serving Hugging Face TEI's API (/embed, /rerank, /info, /health) and vLLM's
OpenAI-compatible API (/v1/chat/completions, /v1/models) from model weights shipped in pip
packages. Production swaps in real TEI and vLLM containers by configuration alone.
"""

__version__ = "0.1.0"
