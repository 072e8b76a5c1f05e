"""action_items and postmortem_prose: what people add to a postmortem (action items with owner
and due date, and the prose sections they write, which drafts never overwrite)

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-26 14:45:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0009'
down_revision: str | None = '0008'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'action_items',
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('incident_id', sa.Integer(), nullable=False),
        sa.Column('text', sa.String(), nullable=False),
        sa.Column('owner', sa.String(), nullable=False),
        sa.Column('due', sa.Date(), nullable=True),
        sa.Column('created_by', sa.String(), nullable=False),
        sa.ForeignKeyConstraint(['incident_id'], ['incidents.id']),
        sa.PrimaryKeyConstraint('id'),
    )
    with op.batch_alter_table('action_items', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_action_items_incident_id'), ['incident_id'])
    op.create_table(
        'postmortem_prose',
        sa.Column('written_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('incident_id', sa.Integer(), nullable=False),
        sa.Column('section', sa.String(), nullable=False),
        sa.Column('text', sa.String(), nullable=False),
        sa.Column('written_by', sa.String(), nullable=False),
        sa.ForeignKeyConstraint(['incident_id'], ['incidents.id']),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('incident_id', 'section', name='uq_postmortem_prose'),
    )
    with op.batch_alter_table('postmortem_prose', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_postmortem_prose_incident_id'), ['incident_id'])


def downgrade() -> None:
    with op.batch_alter_table('postmortem_prose', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_postmortem_prose_incident_id'))
    op.drop_table('postmortem_prose')
    with op.batch_alter_table('action_items', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_action_items_incident_id'))
    op.drop_table('action_items')
