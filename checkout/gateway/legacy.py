"""The mock gateway's legacy interface: the same provider as it was before idempotency keys.

``charge`` takes no key (asked twice, it charges twice), so a merchant must ``find_by_reference`` before any retry.
It sends no webhooks, and knows nothing of the shop: a reference is whatever the merchant sends.
Design: docs/design.md#checkoutgatewaylegacypy-the-interface-without-keys
"""

from __future__ import annotations

import secrets
import time
from dataclasses import replace

import sqlalchemy as sa
from sqlalchemy.orm import Session

from checkout.database import insert_ignoring_conflicts, utcnow
from checkout.gateway.cards import Behaviour, last4
from checkout.gateway.client import (
    CardDeclined,
    Charge,
    GatewayTimeout,
    GatewayUnavailable,
    Ledger,
    charge_from_row,
    new_charge,
)
from checkout.gateway.models import DECLINED, SUCCEEDED, GatewayCharge, GatewayFaultMark

INTERNAL_KEY_PREFIX = "legacy-"


def _as_charge(row: GatewayCharge) -> Charge:
    """What the legacy interface answers: the charge without its internal key (it has no key to show)."""
    return replace(charge_from_row(row), gateway_key="")


class LegacyGateway(Ledger):
    # -- the provider's (old) interface -------------------------------------

    def charge(self, *, amount_cents: int, currency: str, card_number: str, reference: str) -> Charge:
        """Charge. Every call is a new charge: this interface cannot tell a retry from a new payment."""
        digits, card, slowness = self._test_card(amount_cents, card_number)
        if card is Behaviour.UNAVAILABLE_ONCE and self._first_time(reference, "unavailable"):
            raise GatewayUnavailable("the gateway is unavailable; nothing was charged")
        delay = slowness / 2
        if delay:
            time.sleep(min(delay, self.timeout_seconds))
        status = DECLINED if card is Behaviour.DECLINED else SUCCEEDED
        charge = self._insert(reference, amount_cents, currency, status, last4(digits), card.name)
        if delay:
            time.sleep(max(0.0, min(delay, self.timeout_seconds - delay)))
        if slowness > self.timeout_seconds or (
            card is Behaviour.ANSWER_LOST_ONCE and self._first_time(reference, "answer lost")
        ):
            raise GatewayTimeout("no answer from the gateway; the charge may exist")
        if charge.status == DECLINED:
            raise CardDeclined(charge)
        return charge

    def find_by_reference(self, reference: str) -> list[Charge]:
        """Every charge made through this interface for ``reference``, oldest first (succeeded or declined)."""
        with Session(self.engine) as session, session.begin():
            rows = session.scalars(
                sa.select(GatewayCharge)
                .where(GatewayCharge.reference == reference, GatewayCharge.keyed.is_(False))
                .order_by(GatewayCharge.created_at, GatewayCharge.id)
            ).all()
            return [_as_charge(row) for row in rows]

    # -- internals ---------------------------------------------------------------

    def _insert(
        self, reference: str, amount_cents: int, currency: str, status: str, card_last4: str, behaviour_name: str
    ) -> Charge:
        with Session(self._writer, expire_on_commit=False) as session, session.begin():
            internal_key = INTERNAL_KEY_PREFIX + secrets.token_hex(16)  # internal: never shown, never asked for
            values = new_charge(internal_key, reference, amount_cents, currency, status, card_last4, behaviour_name)
            row = GatewayCharge(**values, keyed=False)
            session.add(row)
        return _as_charge(row)

    def _first_time(self, reference: str, fault: str) -> bool:
        """True the first time this reference meets this fault (remembered in the database, across processes)."""
        with Session(self._writer) as session, session.begin():
            inserted = session.execute(
                insert_ignoring_conflicts(GatewayFaultMark, session)
                .values(gateway_key=f"legacy {fault}: {reference}", fault=fault, created_at=utcnow())
                .returning(GatewayFaultMark.gateway_key)
            ).scalar_one_or_none()
        return inserted is not None
