"""Conversation sessions: Redis-backed memory of turns, and the condensing of follow-up questions."""
