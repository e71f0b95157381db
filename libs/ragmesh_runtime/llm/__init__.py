"""The llm generator profile: /v1/chat/completions from a GGUF model run by llama.cpp (xllamacpp)."""
