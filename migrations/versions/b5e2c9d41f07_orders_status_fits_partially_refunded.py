"""orders.status fits 'partially_refunded' (18 characters; it was 16)

SQLite does not enforce a VARCHAR's length, PostgreSQL does: a partial refund
failed there. A test now checks that every state fits its column.

Revision ID: b5e2c9d41f07
Revises: a44dcf394002
Create Date: 2026-12-01 08:20:00.000000

"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = 'b5e2c9d41f07'
down_revision = 'a44dcf394002'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('orders', schema=None) as batch_op:
        batch_op.alter_column('status', existing_type=sa.String(length=16), type_=sa.String(length=20))


def downgrade():
    with op.batch_alter_table('orders', schema=None) as batch_op:
        batch_op.alter_column('status', existing_type=sa.String(length=20), type_=sa.String(length=16))
