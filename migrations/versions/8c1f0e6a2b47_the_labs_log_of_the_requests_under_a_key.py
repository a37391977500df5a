"""the lab's log of the requests under a key

/api/lab/requests answered from the audit trail, rebuilding each status from
event names, plus a table of the refusals the trail missed. It now answers
from a plain log: one row per known customer's POST under a key, written as
it arrives, its status added as it is answered. The refusals' table goes
(the lab's rows are a teaching aid, not history: nothing is carried over).

Revision ID: 8c1f0e6a2b47
Revises: 5b004e0f7748
Create Date: 2026-12-05 12:10:00.000000

"""
from alembic import op
import sqlalchemy as sa


revision = "8c1f0e6a2b47"
down_revision = "5b004e0f7748"
branch_labels = None
depends_on = None


def upgrade():
    op.drop_index(op.f("ix_lab_untraced_requests_key"), table_name="lab_untraced_requests")
    op.drop_table("lab_untraced_requests")
    op.create_table(
        "lab_requests",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("endpoint", sa.String(length=100), nullable=False),
        sa.Column("customer", sa.String(length=64), nullable=False),
        sa.Column("status", sa.Integer(), nullable=True),
        sa.Column("replayed", sa.Boolean(), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_lab_requests")),
    )
    op.create_index(op.f("ix_lab_requests_key"), "lab_requests", ["key"])


def downgrade():
    op.drop_index(op.f("ix_lab_requests_key"), table_name="lab_requests")
    op.drop_table("lab_requests")
    op.create_table(
        "lab_untraced_requests",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("endpoint", sa.String(length=100), nullable=False),
        sa.Column("customer", sa.String(length=64), nullable=True),
        sa.Column("status", sa.Integer(), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_lab_untraced_requests")),
    )
    op.create_index(op.f("ix_lab_untraced_requests_key"), "lab_untraced_requests", ["key"])
