"""the outbox's claims: a relay claims a message with a short lease before it sends it

Two relays (a thread in every gunicorn worker, or several `flask outbox relay --forever`)
must not both send the same message: each takes it first with a conditional UPDATE of
claimed_until, and a failed send holds the message back for a backoff with the same column.

Revision ID: a44dcf394002
Revises: 9923d0d4f1a3
Create Date: 2026-12-01 08:00:00.000000

"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = 'a44dcf394002'
down_revision = '9923d0d4f1a3'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('outbox_messages', schema=None) as batch_op:
        batch_op.add_column(sa.Column('claimed_until', sa.DateTime(timezone=True), nullable=True))


def downgrade():
    with op.batch_alter_table('outbox_messages', schema=None) as batch_op:
        batch_op.drop_column('claimed_until')
