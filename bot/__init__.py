"""gpu-oncall: ChatOps incident response with a runbook engine for GPU clusters."""
