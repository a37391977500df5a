"""payments: the articles' own request (POST /api/payments)

A payment for the client's own order reference (``orderId``), in minor units,
UAH or USD. Unique on (customer, idempotency key), so a late retry finds its
payment; and one pending or succeeded payment per (customer, order reference),
a partial unique index (SQLite and PostgreSQL both have them): two keys racing
for one order can never both be charged, while a declined or abandoned attempt
leaves the order free for another key. CHECKs keep the amount within 1 to
1,000,000,000 and the currency and status to their lists.

Revision ID: f0cd5db29500
Revises: f3b7d2a9c1e5
Create Date: 2026-12-01 22:06:17.440199

"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = 'f0cd5db29500'
down_revision = 'f3b7d2a9c1e5'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('payments',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('public_id', sa.String(length=32), nullable=False),
    sa.Column('customer_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('idempotency_key', sa.String(length=255), nullable=False),
    sa.Column('order_ref', sa.String(length=64), nullable=False),
    sa.Column('gateway_key', sa.String(length=64), nullable=False),
    sa.Column('amount', sa.Integer(), nullable=False),
    sa.Column('currency', sa.String(length=3), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('card_last4', sa.String(length=4), nullable=False),
    sa.Column('charge_id', sa.String(length=32), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.CheckConstraint("currency IN ('UAH', 'USD')", name=op.f('ck_payments_currency')),
    sa.CheckConstraint("status IN ('pending', 'succeeded', 'declined', 'failed')", name=op.f('ck_payments_status')),
    sa.CheckConstraint('amount > 0 AND amount <= 1000000000', name=op.f('ck_payments_amount_in_range')),
    sa.ForeignKeyConstraint(['customer_id'], ['customers.id'], name=op.f('fk_payments_customer_id_customers')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_payments')),
    sa.UniqueConstraint('customer_id', 'idempotency_key', name=op.f('uq_payments_customer_id_idempotency_key')),
    sa.UniqueConstraint('gateway_key', name=op.f('uq_payments_gateway_key')),
    sa.UniqueConstraint('public_id', name=op.f('uq_payments_public_id'))
    )
    with op.batch_alter_table('payments', schema=None) as batch_op:
        batch_op.create_index('uq_payments_one_live_per_order_ref', ['customer_id', 'order_ref'], unique=True, sqlite_where=sa.text("status IN ('pending', 'succeeded')"), postgresql_where=sa.text("status IN ('pending', 'succeeded')"))


def downgrade():
    with op.batch_alter_table('payments', schema=None) as batch_op:
        batch_op.drop_index('uq_payments_one_live_per_order_ref', sqlite_where=sa.text("status IN ('pending', 'succeeded')"), postgresql_where=sa.text("status IN ('pending', 'succeeded')"))

    op.drop_table('payments')
