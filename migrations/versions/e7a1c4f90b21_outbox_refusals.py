"""the outbox's refusals: a message the mail server refused for good is kept, not retried

A 5xx answer, an address the server cannot take (no SMTPUTF8) or a message that cannot be
built is final: outbox_messages.refused_at marks it, its error stays in last_error, and no
relay takes it again. A temporary refusal (4xx) still waits out a backoff in claimed_until.

Revision ID: e7a1c4f90b21
Revises: 8d2c8b3e0b4a
Create Date: 2026-12-01 21:20:00.000000

"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = 'e7a1c4f90b21'
down_revision = '8d2c8b3e0b4a'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('outbox_messages', schema=None) as batch_op:
        batch_op.add_column(sa.Column('refused_at', sa.DateTime(timezone=True), nullable=True))


def downgrade():
    with op.batch_alter_table('outbox_messages', schema=None) as batch_op:
        batch_op.drop_column('refused_at')
