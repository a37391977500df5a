"""The words a shopper reads for the shop's states (the states themselves stay identifiers)."""

from __future__ import annotations

from flask_babel import lazy_gettext as _l

from checkout.shop.models import DECLINED, FAILED, PAID, PARTIALLY_REFUNDED, PENDING, REFUND_SUCCEEDED, REFUNDED

STATUS_LABELS = {
    PENDING: _l("pending"),
    PAID: _l("paid"),
    DECLINED: _l("declined"),
    FAILED: _l("not completed"),
    PARTIALLY_REFUNDED: _l("partially refunded"),
    REFUNDED: _l("refunded"),
    REFUND_SUCCEEDED: _l("succeeded"),
}


def status_label(status: str) -> str:
    """A state in the page's language; an unknown one as it is."""
    return str(STATUS_LABELS.get(status, status))
