"""the lab's mistakes: the key stores of the wrong twins of POST /api/orders

Three small tables, each with the constraints its twin's story needs, none of them the
safe engine's: lab_mistake_keys (unique per twin, customer and key, for the twins whose
mistake lies elsewhere), lab_check_then_insert_keys (no unique constraint at all: only
its SELECT looks for a duplicate) and lab_unscoped_keys (unique on the key alone).

Revision ID: 8d2c8b3e0b4a
Revises: c3f1a7d2e8b4
Create Date: 2026-12-01 08:40:00.000000

"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '8d2c8b3e0b4a'
down_revision = 'c3f1a7d2e8b4'
branch_labels = None
depends_on = None


def _key_columns():
    """The columns every key store has: whose key, the request's fingerprint, its order, its answer."""
    return [
        sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
        sa.Column('customer', sa.String(length=64), nullable=False),
        sa.Column('key', sa.String(length=255), nullable=False),
        sa.Column('fingerprint', sa.String(length=64), nullable=True),
        sa.Column('order_id', sa.String(length=32), nullable=True),
        sa.Column('response_status', sa.Integer(), nullable=True),
        sa.Column('response_headers', sa.JSON(), nullable=True),
        sa.Column('response_body', sa.LargeBinary(), nullable=True),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    ]


def upgrade():
    op.create_table('lab_mistake_keys',
    *_key_columns(),
    sa.Column('mistake', sa.String(length=40), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_lab_mistake_keys')),
    sa.UniqueConstraint('mistake', 'customer', 'key', name=op.f('uq_lab_mistake_keys_mistake_customer_key'))
    )
    # No unique constraint: the mistake itself.
    op.create_table('lab_check_then_insert_keys',
    *_key_columns(),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_lab_check_then_insert_keys'))
    )
    with op.batch_alter_table('lab_check_then_insert_keys', schema=None) as batch_op:
        batch_op.create_index('ix_lab_check_then_insert_keys_lookup', ['customer', 'key'], unique=False)

    # Unique on the key alone: the mistake itself.
    op.create_table('lab_unscoped_keys',
    *_key_columns(),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_lab_unscoped_keys')),
    sa.UniqueConstraint('key', name=op.f('uq_lab_unscoped_keys_key'))
    )


def downgrade():
    op.drop_table('lab_unscoped_keys')
    with op.batch_alter_table('lab_check_then_insert_keys', schema=None) as batch_op:
        batch_op.drop_index('ix_lab_check_then_insert_keys_lookup')
    op.drop_table('lab_check_then_insert_keys')
    op.drop_table('lab_mistake_keys')
