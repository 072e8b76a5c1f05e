"""Slack presentation (stage 6): the bolt app behind `/gpu`, live triage messages and approval
buttons. Renders and relays; every decision goes through the same engine, policy and storage
as the CLI.
"""
