"""Runbook YAML -> LangGraph run: schema, loading, expressions, templates, compiling, running."""
