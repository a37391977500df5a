"""lab_workers: which app server each worker process belongs to

Behind a proxy with two app servers (make proxy), the lab's timeline names the
server that took each step: a server started with CHECKOUT_SERVER_NAME writes one
row per worker process (its host:pid, as the audit trail names it, and the
server's name). The lab's own table; nothing of the defence reads it.

Revision ID: f3b7d2a9c1e5
Revises: e7a1c4f90b21
Create Date: 2026-12-01 22:00:00.000000

"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = 'f3b7d2a9c1e5'
down_revision = 'e7a1c4f90b21'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('lab_workers',
    sa.Column('worker', sa.String(length=64), nullable=False),
    sa.Column('server', sa.String(length=64), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('worker', name=op.f('pk_lab_workers'))
    )


def downgrade():
    op.drop_table('lab_workers')
