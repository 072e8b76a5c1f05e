"""humans on the record: where an incident's fired_at came from, whether it is a `check` (a
diagnosis that found nothing, kept out of MTTR), the GPU-hours it lost (set at resolution), and
who pinned or unpinned a timeline event when (bot/incidents/humans.py)

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24 03:21:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0006'
down_revision: str | None = '0005'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('incidents') as batch:
        batch.add_column(sa.Column('fired_at_source', sa.String(), nullable=True))
        batch.add_column(
            sa.Column('kind', sa.String(), nullable=False, server_default='incident')
        )
        batch.add_column(sa.Column('gpu_hours_lost', sa.Float(), nullable=True))
    # Before this release a human correction was the only way fired_at_corrected_by was set.
    op.execute(
        "UPDATE incidents SET fired_at_source = CASE "
        "WHEN fired_at_corrected_by IS NOT NULL THEN 'human' "
        "WHEN fired_at IS NOT NULL THEN 'alert' END"
    )
    with op.batch_alter_table('timeline_events') as batch:
        batch.add_column(sa.Column('pinned_by', sa.String(), nullable=True))
        batch.add_column(sa.Column('pinned_at', sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('timeline_events') as batch:
        batch.drop_column('pinned_at')
        batch.drop_column('pinned_by')
    with op.batch_alter_table('incidents') as batch:
        batch.drop_column('gpu_hours_lost')
        batch.drop_column('kind')
        batch.drop_column('fired_at_source')
