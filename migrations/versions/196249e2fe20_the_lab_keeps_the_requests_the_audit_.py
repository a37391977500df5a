"""the lab keeps the requests under a key that the audit trail missed

A POST refused under a key before the engine ran (a bad token, body or
key), or in a first phase that rolled back, leaves no audit event, so the
lab's list of the requests under a key (/api/lab/requests) could not show
it. The lab keeps those in a table of its own.

Revision ID: 196249e2fe20
Revises: b8e4d1f2a7c3
Create Date: 2026-12-03 17:14:41.457891

"""
from alembic import op
import sqlalchemy as sa


revision = "196249e2fe20"
down_revision = "b8e4d1f2a7c3"
branch_labels = None
depends_on = None


def upgrade():
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


def downgrade():
    op.drop_index(op.f("ix_lab_untraced_requests_key"), table_name="lab_untraced_requests")
    op.drop_table("lab_untraced_requests")
