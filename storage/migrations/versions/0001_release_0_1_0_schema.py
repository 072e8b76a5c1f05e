"""release 0.1.0 schema

Revision ID: 0001
Revises: (none)
Create Date: 2026-11-24 00:55:58.202504
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0001'
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('incidents',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('runbook', sa.String(), nullable=False),
    sa.Column('target', sa.String(), nullable=False),
    sa.Column('target_kind', sa.String(), nullable=False),
    sa.Column('severity', sa.String(), nullable=False),
    sa.Column('title', sa.String(), nullable=False),
    sa.Column('state', sa.String(), nullable=False),
    sa.Column('group_key', sa.String(), nullable=False),
    sa.Column('layer', sa.String(), nullable=True),
    sa.Column('confidence', sa.Float(), nullable=True),
    sa.Column('culprits', sa.JSON(), nullable=False),
    sa.Column('fired_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('detected_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('diagnosed_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('acknowledged_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('acknowledged_by', sa.String(), nullable=True),
    sa.Column('mitigated_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('resolved_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('fired_at_corrected_by', sa.String(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('incidents', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_incidents_group_key'), ['group_key'], unique=False)
        batch_op.create_index(batch_op.f('ix_incidents_state'), ['state'], unique=False)
        batch_op.create_index('uq_incidents_open_group_key', ['group_key'], unique=True, sqlite_where=sa.text("state != 'resolved'"), postgresql_where=sa.text("state != 'resolved'"))

    op.create_table('chat_messages',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('incident_id', sa.Integer(), nullable=False),
    sa.Column('run_id', sa.String(), nullable=True),
    sa.Column('channel', sa.String(), nullable=False),
    sa.Column('ts', sa.String(), nullable=False),
    sa.Column('kind', sa.String(), nullable=False),
    sa.Column('posted_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['incident_id'], ['incidents.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('channel', 'ts', name='uq_chat_messages_channel_ts')
    )
    with op.batch_alter_table('chat_messages', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_chat_messages_incident_id'), ['incident_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_chat_messages_run_id'), ['run_id'], unique=False)

    op.create_table('received_alerts',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('fingerprint', sa.String(), nullable=False),
    sa.Column('status', sa.String(), nullable=False),
    sa.Column('starts_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('ends_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('alertname', sa.String(), nullable=False),
    sa.Column('labels', sa.JSON(), nullable=False),
    sa.Column('annotations', sa.JSON(), nullable=False),
    sa.Column('received_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('incident_id', sa.Integer(), nullable=True),
    sa.Column('runbook', sa.String(), nullable=True),
    sa.ForeignKeyConstraint(['incident_id'], ['incidents.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('fingerprint', 'status', 'starts_at', name='uq_received_alerts_identity')
    )
    with op.batch_alter_table('received_alerts', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_received_alerts_fingerprint'), ['fingerprint'], unique=False)
        batch_op.create_index(batch_op.f('ix_received_alerts_incident_id'), ['incident_id'], unique=False)

    op.create_table('runbook_runs',
    sa.Column('id', sa.String(), nullable=False),
    sa.Column('incident_id', sa.Integer(), nullable=False),
    sa.Column('runbook', sa.String(), nullable=False),
    sa.Column('inputs', sa.JSON(), nullable=False),
    sa.Column('status', sa.String(), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('verdict', sa.JSON(), nullable=True),
    sa.Column('queries', sa.Integer(), nullable=False),
    sa.Column('error', sa.String(), nullable=True),
    sa.ForeignKeyConstraint(['incident_id'], ['incidents.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('runbook_runs', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_runbook_runs_incident_id'), ['incident_id'], unique=False)

    op.create_table('timeline_events',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('incident_id', sa.Integer(), nullable=False),
    sa.Column('at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('kind', sa.String(), nullable=False),
    sa.Column('actor', sa.String(), nullable=False),
    sa.Column('summary', sa.String(), nullable=False),
    sa.Column('payload', sa.JSON(), nullable=False),
    sa.Column('pinned', sa.Boolean(), nullable=False),
    sa.Column('run_id', sa.String(), nullable=True),
    sa.Column('step_id', sa.String(), nullable=True),
    sa.ForeignKeyConstraint(['incident_id'], ['incidents.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('timeline_events', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_timeline_events_incident_id'), ['incident_id'], unique=False)

    op.create_table('actions',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('run_id', sa.String(), nullable=False),
    sa.Column('incident_id', sa.Integer(), nullable=True),
    sa.Column('step_id', sa.String(), nullable=False),
    sa.Column('action', sa.String(), nullable=False),
    sa.Column('target', sa.String(), nullable=False),
    sa.Column('params', sa.JSON(), nullable=False),
    sa.Column('idempotency_key', sa.String(), nullable=False),
    sa.Column('status', sa.String(), nullable=False),
    sa.Column('outcome', sa.String(), nullable=True),
    sa.Column('result', sa.JSON(), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('lease_expires_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['incident_id'], ['incidents.id'], ),
    sa.ForeignKeyConstraint(['run_id'], ['runbook_runs.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('idempotency_key')
    )
    with op.batch_alter_table('actions', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_actions_incident_id'), ['incident_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_actions_run_id'), ['run_id'], unique=False)

    op.create_table('approvals',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('run_id', sa.String(), nullable=False),
    sa.Column('incident_id', sa.Integer(), nullable=False),
    sa.Column('step_id', sa.String(), nullable=False),
    sa.Column('state', sa.String(), nullable=False),
    sa.Column('requested_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('decided_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('actor', sa.String(), nullable=True),
    sa.Column('reason', sa.String(), nullable=True),
    sa.Column('payload', sa.JSON(), nullable=False),
    sa.ForeignKeyConstraint(['incident_id'], ['incidents.id'], ),
    sa.ForeignKeyConstraint(['run_id'], ['runbook_runs.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('run_id', 'step_id', name='uq_approvals_run_step')
    )
    with op.batch_alter_table('approvals', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_approvals_incident_id'), ['incident_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_approvals_run_id'), ['run_id'], unique=False)

    op.create_table('findings',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('run_id', sa.String(), nullable=False),
    sa.Column('incident_id', sa.Integer(), nullable=False),
    sa.Column('check_id', sa.String(), nullable=False),
    sa.Column('layer', sa.String(), nullable=False),
    sa.Column('severity', sa.String(), nullable=False),
    sa.Column('summary', sa.String(), nullable=False),
    sa.Column('evidence', sa.JSON(), nullable=False),
    sa.Column('culprit', sa.JSON(), nullable=False),
    sa.Column('at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['incident_id'], ['incidents.id'], ),
    sa.ForeignKeyConstraint(['run_id'], ['runbook_runs.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('findings', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_findings_incident_id'), ['incident_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_findings_run_id'), ['run_id'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('findings', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_findings_run_id'))
        batch_op.drop_index(batch_op.f('ix_findings_incident_id'))

    op.drop_table('findings')
    with op.batch_alter_table('approvals', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_approvals_run_id'))
        batch_op.drop_index(batch_op.f('ix_approvals_incident_id'))

    op.drop_table('approvals')
    with op.batch_alter_table('actions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_actions_run_id'))
        batch_op.drop_index(batch_op.f('ix_actions_incident_id'))

    op.drop_table('actions')
    with op.batch_alter_table('timeline_events', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_timeline_events_incident_id'))

    op.drop_table('timeline_events')
    with op.batch_alter_table('runbook_runs', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_runbook_runs_incident_id'))

    op.drop_table('runbook_runs')
    with op.batch_alter_table('received_alerts', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_received_alerts_incident_id'))
        batch_op.drop_index(batch_op.f('ix_received_alerts_fingerprint'))

    op.drop_table('received_alerts')
    with op.batch_alter_table('chat_messages', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_chat_messages_run_id'))
        batch_op.drop_index(batch_op.f('ix_chat_messages_incident_id'))

    op.drop_table('chat_messages')
    with op.batch_alter_table('incidents', schema=None) as batch_op:
        batch_op.drop_index('uq_incidents_open_group_key', sqlite_where=sa.text("state != 'resolved'"), postgresql_where=sa.text("state != 'resolved'"))
        batch_op.drop_index(batch_op.f('ix_incidents_state'))
        batch_op.drop_index(batch_op.f('ix_incidents_group_key'))

    op.drop_table('incidents')
