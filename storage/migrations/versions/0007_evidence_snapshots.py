"""evidence_snapshots: the key series behind a run's verdict (culprit and peers over the incident
window), stored when the run localizes so a postmortem renders after Prometheus has forgotten

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24 03:25:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0007'
down_revision: str | None = '0006'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'evidence_snapshots',
        sa.Column('start', sa.DateTime(timezone=True), nullable=False),
        sa.Column('end', sa.DateTime(timezone=True), nullable=False),
        sa.Column('onset_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('series', sa.JSON(), nullable=False),
        sa.Column('taken_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('incident_id', sa.Integer(), nullable=False),
        sa.Column('run_id', sa.String(), nullable=False),
        sa.Column('signal', sa.String(), nullable=False),
        sa.Column('step_seconds', sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(['incident_id'], ['incidents.id']),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('run_id', 'signal', name='uq_evidence_snapshots_run_signal'),
    )
    with op.batch_alter_table('evidence_snapshots', schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f('ix_evidence_snapshots_incident_id'), ['incident_id'], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table('evidence_snapshots', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_evidence_snapshots_incident_id'))
    op.drop_table('evidence_snapshots')
