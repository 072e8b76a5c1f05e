"""Trigger -> incident request: Alertmanager webhooks and `/gpu` commands, validated and routed."""
