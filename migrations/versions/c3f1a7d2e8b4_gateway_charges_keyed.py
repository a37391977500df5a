"""gateway_charges.keyed: the legacy interface charges on every call

The mock gateway gains a legacy interface with no idempotency key (the lab's
legacy-gateway route). Its charges are marked keyed = false, and the ledger's
"one succeeded charge per reference" index, a defence of the keyed interface
only, no longer covers them: a legacy provider charges twice if asked twice.

Revision ID: c3f1a7d2e8b4
Revises: b5e2c9d41f07
Create Date: 2026-12-02 09:00:00.000000

"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = 'c3f1a7d2e8b4'
down_revision = 'b5e2c9d41f07'
branch_labels = None
depends_on = None

INDEX = 'uq_gateway_charges_one_succeeded_per_reference'


def upgrade():
    with op.batch_alter_table('gateway_charges', schema=None) as batch_op:
        batch_op.add_column(sa.Column('keyed', sa.Boolean(), server_default=sa.true(), nullable=False))
        batch_op.drop_index(INDEX, sqlite_where=sa.text("status = 'succeeded'"), postgresql_where=sa.text("status = 'succeeded'"))
        batch_op.create_index(INDEX, ['reference'], unique=True, sqlite_where=sa.text("status = 'succeeded' AND keyed"), postgresql_where=sa.text("status = 'succeeded' AND keyed"))


def downgrade():
    with op.batch_alter_table('gateway_charges', schema=None) as batch_op:
        batch_op.drop_index(INDEX, sqlite_where=sa.text("status = 'succeeded' AND keyed"), postgresql_where=sa.text("status = 'succeeded' AND keyed"))
        batch_op.create_index(INDEX, ['reference'], unique=True, sqlite_where=sa.text("status = 'succeeded'"), postgresql_where=sa.text("status = 'succeeded'"))
        batch_op.drop_column('keyed')
