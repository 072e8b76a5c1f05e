"""Defaults of the storage settings that more than one reader needs (bot.config's `Settings`
and the CLI's light reader for read-only commands, bot/cli/read_config.py). No imports: the
light reader must not pay for pydantic or SQLAlchemy to learn where the database is."""

DEFAULT_DATABASE_URL = "sqlite:///.gpu-oncall/oncall.db"
"""Where the database is when `GPU_ONCALL_STORAGE__URL` is not set."""
