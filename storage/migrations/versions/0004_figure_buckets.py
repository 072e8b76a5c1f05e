"""figure_buckets: the MTTR histograms of /metrics, maintained incrementally (the rows are
computed from the incidents by `gpu-oncall db upgrade` and at start-up, in bot/incidents/figures.py)

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-24 02:08:23
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0004'
down_revision: str | None = '0003'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'figure_buckets',
        sa.Column('figure', sa.String(), nullable=False),
        sa.Column('runbook', sa.String(), nullable=False),
        sa.Column('layer', sa.String(), nullable=False),
        sa.Column('severity', sa.String(), nullable=False),
        sa.Column('bucket', sa.Integer(), autoincrement=False, nullable=False),
        sa.Column('observations', sa.BigInteger(), nullable=False),
        sa.Column('micros', sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint('figure', 'runbook', 'layer', 'severity', 'bucket'),
    )


def downgrade() -> None:
    op.drop_table('figure_buckets')
