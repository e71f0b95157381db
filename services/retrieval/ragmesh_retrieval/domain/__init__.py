"""Retrieval's application core: validation, corpus routing, hybrid search, pinned reads.

Nothing here imports grpc or a client library; the store, the embedder and the lexical encoder
arrive through ports.
"""
