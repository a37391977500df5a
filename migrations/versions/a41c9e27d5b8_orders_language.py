"""orders: the shopper's language, for the emails

An order remembers the language its shopper used when it was placed, so its
confirmation and refund emails are written in it whichever request pays it
(a webhook that finishes a lost-answer payment has no language). Existing
orders get English, the language the shop wrote before.

Revision ID: a41c9e27d5b8
Revises: f0cd5db29500
Create Date: 2026-12-01 22:40:00.000000

"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = "a41c9e27d5b8"
down_revision = "f0cd5db29500"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("orders", schema=None) as batch_op:
        batch_op.add_column(sa.Column("language", sa.String(length=8), server_default="en", nullable=False))


def downgrade():
    with op.batch_alter_table("orders", schema=None) as batch_op:
        batch_op.drop_column("language")
