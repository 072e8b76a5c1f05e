"""Proposal -> approval -> execution: the action registry, approval policy, exactly-once runs."""
