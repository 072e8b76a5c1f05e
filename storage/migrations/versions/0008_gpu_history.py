"""gpu_history: every finding and action keyed by GPU UUID/serial, kept across incidents (fault
history per GPU, storage/gpu_history.py)

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-24 03:22:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0008'
down_revision: str | None = '0007'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'gpu_history',
        sa.Column('at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('gpu_key', sa.String(), nullable=False),
        sa.Column('uuid', sa.String(), nullable=True),
        sa.Column('serial', sa.String(), nullable=True),
        sa.Column('node', sa.String(), nullable=False),
        sa.Column('gpu', sa.String(), nullable=True),
        sa.Column('kind', sa.String(), nullable=False),
        sa.Column('what', sa.String(), nullable=False),
        sa.Column('incident_id', sa.Integer(), nullable=True),
        sa.Column('run_id', sa.String(), nullable=False),
        sa.Column('detail', sa.String(), nullable=False),
        sa.ForeignKeyConstraint(['incident_id'], ['incidents.id']),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('run_id', 'gpu_key', 'kind', 'what', name='uq_gpu_history_run_fact'),
    )
    with op.batch_alter_table('gpu_history', schema=None) as batch_op:
        batch_op.create_index('ix_gpu_history_key_at', ['gpu_key', 'at'], unique=False)
        batch_op.create_index(
            batch_op.f('ix_gpu_history_incident_id'), ['incident_id'], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table('gpu_history', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_gpu_history_incident_id'))
        batch_op.drop_index('ix_gpu_history_key_at')
    op.drop_table('gpu_history')
