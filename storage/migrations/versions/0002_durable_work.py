"""durable work queue (work_items) and failed incidents free their group key

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-24 01:10:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0002'
down_revision: str | None = '0001'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_OLD = "state != 'resolved'"
_NEW = "state NOT IN ('resolved', 'failed')"


def upgrade() -> None:
    op.create_table('work_items',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('key', sa.String(), nullable=False),
    sa.Column('kind', sa.String(), nullable=False),
    sa.Column('incident_id', sa.Integer(), nullable=False),
    sa.Column('run_id', sa.String(), nullable=False),
    sa.Column('payload', sa.JSON(), nullable=False),
    sa.Column('state', sa.String(), nullable=False),
    sa.Column('due_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('owner', sa.String(), nullable=True),
    sa.Column('lease_expires_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('last_error', sa.String(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['incident_id'], ['incidents.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('key')
    )
    with op.batch_alter_table('work_items', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_work_items_incident_id'), ['incident_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_work_items_run_id'), ['run_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_work_items_state'), ['state'], unique=False)
    _group_key_index(_NEW)


def downgrade() -> None:
    _group_key_index(_OLD)
    with op.batch_alter_table('work_items', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_work_items_state'))
        batch_op.drop_index(batch_op.f('ix_work_items_run_id'))
        batch_op.drop_index(batch_op.f('ix_work_items_incident_id'))
    op.drop_table('work_items')


def _group_key_index(predicate: str) -> None:
    """Re-create the one-open-incident-per-group-key index with `predicate`."""
    with op.batch_alter_table('incidents', schema=None) as batch_op:
        batch_op.drop_index('uq_incidents_open_group_key')
        batch_op.create_index(
            'uq_incidents_open_group_key',
            ['group_key'],
            unique=True,
            sqlite_where=sa.text(predicate),
            postgresql_where=sa.text(predicate),
        )
