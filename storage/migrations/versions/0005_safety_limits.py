"""safety: circuit breaker, pause requests and the per-pool lock rows of the execution-time
limit check (issue 12; tables in storage/safety.py)

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24 03:22:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0005'
down_revision: str | None = '0004'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'safety_breakers',
        sa.Column('name', sa.String(), nullable=False),
        sa.Column('state', sa.String(), nullable=False),
        sa.Column('tripped_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('trip_detail', sa.String(), nullable=True),
        sa.Column('reset_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('reset_by', sa.String(), nullable=True),
        sa.Column('reset_reason', sa.String(), nullable=True),
        sa.PrimaryKeyConstraint('name'),
    )
    op.create_table(
        'pause_requests',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('reason', sa.String(), nullable=False),
        sa.Column('requested_by', sa.String(), nullable=False),
        sa.Column('requested_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('resumed_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('resumed_by', sa.String(), nullable=True),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index('ix_pause_requests_resumed_at', 'pause_requests', ['resumed_at'])
    op.create_table(
        'safety_storms',
        sa.Column('scope', sa.String(), nullable=False),
        sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('last_blocked_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('detail', sa.String(), nullable=False),
        sa.PrimaryKeyConstraint('scope'),
    )


def downgrade() -> None:
    op.drop_table('safety_storms')
    op.drop_index('ix_pause_requests_resumed_at', table_name='pause_requests')
    op.drop_table('pause_requests')
    op.drop_table('safety_breakers')
