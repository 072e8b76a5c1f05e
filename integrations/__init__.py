"""Ports (Protocols) and adapters to the systems a GPU cluster runs. Never imports `bot`."""
