"""the lab owns its accounts: paths, purchase labels and seeded stock leave the shop's tables

Which checkout placed an order or a refund, the client's purchase label and
the stock ever seeded are the lab's bookkeeping: they move to ``lab_orders``,
``lab_refunds`` and ``lab_stock``, rows copied as they are. Orders and
refunds keep a non-null idempotency key: the lab's keyless twins gave theirs
none, and each such row gets a key of its own (``lab-<id>``), unique as
every key is.

Revision ID: b8e4d1f2a7c3
Revises: f630f49e52a1
Create Date: 2026-12-02 01:05:00.000000

"""
from alembic import op
import sqlalchemy as sa


revision = "b8e4d1f2a7c3"
down_revision = "f630f49e52a1"
branch_labels = None
depends_on = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade():
    op.create_table(
        "lab_orders",
        sa.Column("order_id", BIG_ID, sa.ForeignKey("orders.id", ondelete="CASCADE"), nullable=False),
        sa.Column("path", sa.String(length=40), nullable=False),
        sa.Column("purchase_ref", sa.String(length=64), nullable=True),
        sa.PrimaryKeyConstraint("order_id", name=op.f("pk_lab_orders")),
    )
    op.create_index(op.f("ix_lab_orders_purchase_ref"), "lab_orders", ["purchase_ref"])
    op.create_table(
        "lab_refunds",
        sa.Column("refund_id", BIG_ID, sa.ForeignKey("refunds.id", ondelete="CASCADE"), nullable=False),
        sa.Column("path", sa.String(length=40), nullable=False),
        sa.PrimaryKeyConstraint("refund_id", name=op.f("pk_lab_refunds")),
    )
    op.create_table(
        "lab_stock",
        sa.Column("sku", sa.String(length=32), nullable=False),
        sa.Column("seeded", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("sku", name=op.f("pk_lab_stock")),
    )
    op.execute(
        "INSERT INTO lab_orders (order_id, path, purchase_ref) "
        "SELECT id, path, purchase_ref FROM orders WHERE path <> 'safe' OR purchase_ref IS NOT NULL"
    )
    op.execute("INSERT INTO lab_refunds (refund_id, path) SELECT id, path FROM refunds WHERE path <> 'safe'")
    op.execute("INSERT INTO lab_stock (sku, seeded) SELECT sku, seeded_stock FROM products")
    op.execute("UPDATE orders SET idempotency_key = 'lab-' || CAST(id AS VARCHAR(20)) WHERE idempotency_key IS NULL")
    op.execute("UPDATE refunds SET idempotency_key = 'lab-' || CAST(id AS VARCHAR(20)) WHERE idempotency_key IS NULL")
    with op.batch_alter_table("orders", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_orders_purchase_ref"))
        batch_op.drop_column("purchase_ref")
        batch_op.drop_column("path")
        batch_op.alter_column("idempotency_key", existing_type=sa.String(length=255), nullable=False)
    with op.batch_alter_table("refunds", schema=None) as batch_op:
        batch_op.drop_column("path")
        batch_op.alter_column("idempotency_key", existing_type=sa.String(length=255), nullable=False)
    with op.batch_alter_table("products", schema=None) as batch_op:
        batch_op.drop_column("seeded_stock")


def downgrade():
    with op.batch_alter_table("products", schema=None) as batch_op:
        batch_op.add_column(sa.Column("seeded_stock", sa.Integer(), server_default="0", nullable=False))
    with op.batch_alter_table("refunds", schema=None) as batch_op:
        batch_op.alter_column("idempotency_key", existing_type=sa.String(length=255), nullable=True)
        batch_op.add_column(sa.Column("path", sa.String(length=40), server_default="safe", nullable=False))
    with op.batch_alter_table("orders", schema=None) as batch_op:
        batch_op.alter_column("idempotency_key", existing_type=sa.String(length=255), nullable=True)
        batch_op.add_column(sa.Column("path", sa.String(length=40), server_default="safe", nullable=False))
        batch_op.add_column(sa.Column("purchase_ref", sa.String(length=64), nullable=True))
        batch_op.create_index(batch_op.f("ix_orders_purchase_ref"), ["purchase_ref"], unique=False)
    op.execute(
        "UPDATE products SET seeded_stock = COALESCE((SELECT seeded FROM lab_stock WHERE lab_stock.sku = products.sku),"
        " stock)"
    )
    op.execute("UPDATE refunds SET path = (SELECT path FROM lab_refunds WHERE refund_id = refunds.id)"
               " WHERE id IN (SELECT refund_id FROM lab_refunds)")
    op.execute("UPDATE orders SET path = (SELECT path FROM lab_orders WHERE order_id = orders.id),"
               " purchase_ref = (SELECT purchase_ref FROM lab_orders WHERE order_id = orders.id)"
               " WHERE id IN (SELECT order_id FROM lab_orders)")
    op.drop_table("lab_stock")
    op.drop_table("lab_refunds")
    op.drop_index(op.f("ix_lab_orders_purchase_ref"), table_name="lab_orders")
    op.drop_table("lab_orders")
