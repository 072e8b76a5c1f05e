"""Alembic environment: runs migrations on the connection `storage.migrating` hands over.

Never reads alembic.ini or the environment: the caller passes the connection in
`config.attributes["connection"]`. SQLite uses batch mode (it cannot ALTER most things).
"""

from __future__ import annotations

from alembic import context
from sqlmodel import SQLModel

import storage.tables  # noqa: F401  (registers every table on SQLModel.metadata)
from storage.migrating import render_item

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=SQLModel.metadata,
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=True,
    render_item=render_item,
)
with context.begin_transaction():
    context.run_migrations()
