"""The extractive answerer behind /v1/chat/completions: it copies evidence sentences, it does not write."""
