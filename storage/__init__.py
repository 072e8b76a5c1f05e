"""Persistence: SQLModel tables, engine/session setup, the LangGraph checkpointer factory."""
