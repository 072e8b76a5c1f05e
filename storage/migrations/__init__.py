"""Alembic migrations of the bot's database (`gpu-oncall db upgrade`); see storage/migrating.py."""
