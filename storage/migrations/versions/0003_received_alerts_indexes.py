"""received_alerts: an index for the storm window; drop the fingerprint index (the unique
identity's first column serves it)

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-24 01:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = '0003'
down_revision: str | None = '0002'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('received_alerts', schema=None) as batch_op:
        batch_op.create_index(
            'ix_received_alerts_storm_window', ['alertname', 'status', 'received_at'], unique=False
        )
        batch_op.drop_index(batch_op.f('ix_received_alerts_fingerprint'))


def downgrade() -> None:
    with op.batch_alter_table('received_alerts', schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f('ix_received_alerts_fingerprint'), ['fingerprint'], unique=False
        )
        batch_op.drop_index('ix_received_alerts_storm_window')
