"""The mock payment gateway: behaves like a remote provider, with its test cards.

Idempotent on the gateway key; ``void`` fences a key with no charge yet, so reconcile's "not charged" stays true.
It commits its ledger on its own connection before it answers, whatever the caller's transaction does.
Design: docs/design.md#checkoutgatewayclientpy-the-mock-payment-gateway
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, fields
from datetime import datetime
from types import SimpleNamespace
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from checkout.database import WRITE_OPTION, insert_ignoring_conflicts, table_of, utcnow
from checkout.gateway.cards import (
    Behaviour,
    behaviour,
    digits_only,
    last4,
    luhn_valid,
)
from checkout.gateway.models import (
    DECLINED,
    SUCCEEDED,
    VOIDED,
    GatewayCharge,
    GatewayEvent,
    GatewayFaultMark,
    GatewayRefund,
)

# --- the gateway -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Charge:
    id: str
    gateway_key: str
    reference: str
    amount_cents: int
    currency: str
    status: str
    card_last4: str
    created_at: datetime

    @property
    def succeeded(self) -> bool:
        return self.status == SUCCEEDED

    @property
    def voided(self) -> bool:
        return self.status == VOIDED


class GatewayError(Exception):
    """Base of what the gateway can answer instead of a charge."""


class CardDeclined(GatewayError):
    """Final: the card was declined (the declined charge is recorded)."""

    def __init__(self, charge: Charge) -> None:
        super().__init__("card declined")
        self.charge = charge


class InvalidCard(GatewayError):
    """Final: the number is not a card number."""


class InvalidAmount(GatewayError):
    """Final: a charge is for more than zero."""


class KeyVoided(GatewayError):
    """Final: the merchant voided this gateway key before any charge landed under it."""


class GatewayUnavailable(GatewayError):
    """Nothing was charged; try again with the same key."""


class GatewayTimeout(GatewayError):
    """The answer did not arrive; a charge may exist. Ask again with the same key."""


class KeyReused(GatewayError):
    """The gateway key was first used for a different amount, currency or reference."""


class ReferenceAlreadyCharged(GatewayError):
    """Another key already holds a succeeded charge for this reference."""


class NoSuchCharge(GatewayError):
    """Final: there is no succeeded charge to refund."""


class RefundExceedsCharge(GatewayError):
    """Final: the gateway never refunds more than it charged."""


@dataclass(frozen=True)
class Refund:
    id: str
    refund_key: str
    charge_id: str
    reference: str
    amount_cents: int
    currency: str
    created_at: datetime


def _refund_from_row(row: GatewayRefund) -> Refund:
    return Refund(row.id, row.refund_key, row.charge_id, row.reference, row.amount_cents, row.currency, row.created_at)


_INSERT_EVENT = sa.insert(table_of(GatewayEvent))  # built once, its values given at execution


def _event(session: Session | sa.Connection, type_: str, data: dict[str, object]) -> None:
    """Record an event for the merchant's webhook, in the transaction of the outcome it tells."""
    now = utcnow()
    session.execute(
        _INSERT_EVENT,
        {
            "id": "evt_" + secrets.token_hex(12),
            "type": type_,
            "created": int(now.timestamp()),
            "data": data,
            "attempts": 0,
            "next_attempt_at": now,
        },
    )


def _charge_data(charge: Charge) -> dict[str, object]:
    return {
        "id": charge.id,
        "reference": charge.reference,
        "gateway_key": charge.gateway_key,
        "amount_cents": charge.amount_cents,
        "currency": charge.currency,
        "status": charge.status,
    }


def new_charge(
    gateway_key: str, reference: str, amount_cents: int, currency: str, status: str, card_last4: str, behaviour: str
) -> dict[str, Any]:
    """A new charge row's columns, whichever interface (keyed or legacy) made it."""
    return {
        "id": "ch_" + secrets.token_hex(12),
        "gateway_key": gateway_key,
        "reference": reference,
        "amount_cents": amount_cents,
        "currency": currency,
        "status": status,
        "card_last4": card_last4,
        "refunded_cents": 0,
        "behaviour": behaviour,
        "created_at": utcnow(),
    }


def charge_from_row(row: Any) -> Charge:
    """A charge from its row: an ORM object, a Core row, or the values it was just inserted with."""
    return Charge(**{field.name: getattr(row, field.name) for field in fields(Charge)})


class Ledger:
    """The mock provider's books and its pace: what both of its interfaces (keyed, legacy) share."""

    def __init__(
        self,
        engine: Engine,
        *,
        slow_seconds: float = 3.0,
        very_slow_seconds: float = 20.0,
        timeout_seconds: float = 25.0,
    ) -> None:
        self.engine = engine
        # The ledger's writes take SQLite's write lock up front (see checkout.database).
        self._writer = engine.execution_options(**{WRITE_OPTION: True})
        self.slow_seconds = slow_seconds
        self.very_slow_seconds = very_slow_seconds
        self.timeout_seconds = timeout_seconds

    def _test_card(self, amount_cents: int, card_number: str) -> tuple[str, Behaviour, float]:
        """A charge's card checked as a provider checks it: its digits, its test behaviour and how
        many seconds it takes (the slow cards spend half before charging and half answering, so a
        worker can die or stall either before or after the charge exists)."""
        if amount_cents <= 0:
            raise InvalidAmount(f"a charge must be for more than zero, not {amount_cents}")
        digits = digits_only(card_number)
        if digits != card_number.replace(" ", "").replace("-", "") or not luhn_valid(digits):
            raise InvalidCard("not a valid card number")
        card = behaviour(digits)
        slowness = {Behaviour.SLOW: self.slow_seconds, Behaviour.VERY_SLOW: self.very_slow_seconds}.get(card, 0.0)
        return digits, card, slowness


class Gateway(Ledger):
    # -- the provider's interface ---------------------------------------

    def retrieve(self, gateway_key: str) -> Charge | None:
        with self.engine.connect() as connection:
            row = connection.execute(sa.select(GatewayCharge).where(GatewayCharge.gateway_key == gateway_key)).first()
            return charge_from_row(row) if row else None

    def expected_seconds(self, card_number: str) -> float:
        """How long a charge with this card is expected to take (a real provider: its usual latency)."""
        slowness = {Behaviour.SLOW: self.slow_seconds, Behaviour.VERY_SLOW: self.very_slow_seconds}
        return min(slowness.get(behaviour(card_number), 1.0), self.timeout_seconds)

    def charge(self, *, gateway_key: str, amount_cents: int, currency: str, card_number: str, reference: str) -> Charge:
        """Charge once per ``gateway_key``; a repeat returns the first answer."""
        digits, card, slowness = self._test_card(amount_cents, card_number)
        if slowness or card is Behaviour.UNAVAILABLE_ONCE:
            # A repeat must not wait or meet the fault again: look for its charge first. Every other
            # card's repeat finds its charge at the insert's conflict: one read fewer on each first
            # charge, for a repeat that takes the write lock (SQLite) to learn it is one.
            existing = self.retrieve(gateway_key)
            if existing is not None:
                return self._repeat(existing, amount_cents, currency, reference)
        if card is Behaviour.UNAVAILABLE_ONCE and self._first_fault(gateway_key, "unavailable"):
            raise GatewayUnavailable("the gateway is unavailable; nothing was charged")
        delay = slowness / 2
        answer_lost = slowness > self.timeout_seconds
        if delay:
            time.sleep(min(delay, self.timeout_seconds))

        status = DECLINED if card is Behaviour.DECLINED else SUCCEEDED
        charge, created = self._insert(gateway_key, reference, amount_cents, currency, status, last4(digits), card.name)
        if charge is None:
            raise ReferenceAlreadyCharged(f"{reference} already has a succeeded charge under another key")
        if not created:
            return self._repeat(charge, amount_cents, currency, reference)
        if delay:
            time.sleep(max(0.0, min(delay, self.timeout_seconds - delay)))
        if card is Behaviour.ANSWER_LOST_ONCE or answer_lost:
            # The provider charged, but we stopped listening (timeout) or the answer was lost.
            raise GatewayTimeout("no answer from the gateway; the charge may exist")
        if charge.status == DECLINED:
            raise CardDeclined(charge)
        return charge

    def void(self, *, gateway_key: str, reference: str) -> Charge:
        """Fence a gateway key: what stands under it now, a charge or this void, is final.

        Returns the charge if one landed first (succeeded or declined), else the void.
        """
        with Session(self._writer) as session, session.begin():
            session.execute(
                insert_ignoring_conflicts(GatewayCharge, session).values(
                    id="vd_" + secrets.token_hex(12),
                    gateway_key=gateway_key,
                    reference=reference,
                    amount_cents=0,
                    currency="",
                    status=VOIDED,
                    card_last4="",
                    refunded_cents=0,
                    behaviour="",
                    created_at=utcnow(),
                )
            )
            row = session.scalars(sa.select(GatewayCharge).where(GatewayCharge.gateway_key == gateway_key)).one()
            return charge_from_row(row)

    def refund(self, *, refund_key: str, charge_id: str, amount_cents: int, currency: str) -> Refund:
        """Refund once per ``refund_key``; a repeat returns the first refund. Never more than charged."""
        if amount_cents <= 0:
            raise InvalidAmount(f"a refund must be for more than zero, not {amount_cents}")
        existing = self.retrieve_refund(refund_key)
        if existing is not None:
            if (existing.charge_id, existing.amount_cents, existing.currency) != (charge_id, amount_cents, currency):
                raise KeyReused("this refund key was used for a different refund")
            return existing
        charge = self.charge_by_id(charge_id)
        if charge is None or charge.status != SUCCEEDED:
            raise NoSuchCharge(f"no succeeded charge {charge_id}")
        # Test mode: a refund of a charge made with a fault card meets the same fault, once.
        if charge.behaviour == Behaviour.UNAVAILABLE_ONCE.name and self._first_fault(refund_key, "unavailable"):
            raise GatewayUnavailable("the gateway is unavailable; nothing was refunded")
        # A refund of a slow card's charge is slow too: half before refunding, half answering.
        delay = min(self.slow_seconds / 2, self.timeout_seconds) if charge.behaviour == Behaviour.SLOW.name else 0.0
        if delay:
            time.sleep(delay)
        refund = self._insert_refund(refund_key, charge, amount_cents, currency)
        if delay:
            time.sleep(delay)
        if charge.behaviour == Behaviour.ANSWER_LOST_ONCE.name and self._first_fault(refund_key, "answer lost"):
            raise GatewayTimeout("no answer from the gateway; the refund may exist")
        return refund

    def retrieve_refund(self, refund_key: str) -> Refund | None:
        with Session(self.engine) as session, session.begin():
            row = session.scalars(sa.select(GatewayRefund).where(GatewayRefund.refund_key == refund_key)).first()
            return _refund_from_row(row) if row else None

    # -- internals -------------------------------------------------------

    def charge_by_id(self, charge_id: str) -> GatewayCharge | None:  # an event's receiver checks it here
        with Session(self.engine, expire_on_commit=False) as session, session.begin():
            return session.get(GatewayCharge, charge_id)

    def _insert_refund(self, refund_key: str, charge: GatewayCharge, amount_cents: int, currency: str) -> Refund:
        """The refund, the charge's refunded amount (a conditional UPDATE, a CHECK behind it) and its event, at once."""
        with Session(self._writer) as session, session.begin():
            inserted = session.execute(
                insert_ignoring_conflicts(GatewayRefund, session)
                .values(
                    id="rf_" + secrets.token_hex(12),
                    refund_key=refund_key,
                    charge_id=charge.id,
                    reference=charge.reference,
                    amount_cents=amount_cents,
                    currency=currency,
                    created_at=utcnow(),
                )
                .returning(GatewayRefund.id)
            ).scalar_one_or_none()
            if inserted is not None:
                taken = session.execute(
                    sa.update(GatewayCharge)
                    .where(
                        GatewayCharge.id == charge.id,
                        GatewayCharge.refunded_cents + amount_cents <= GatewayCharge.amount_cents,
                    )
                    .values(refunded_cents=GatewayCharge.refunded_cents + amount_cents)
                    .returning(GatewayCharge.id)
                ).first()
                if taken is None:
                    raise RefundExceedsCharge(f"{charge.id} has less than {amount_cents} left to refund")
            row = session.scalars(sa.select(GatewayRefund).where(GatewayRefund.refund_key == refund_key)).one()
            if inserted is not None:
                _event(
                    session,
                    "refund.succeeded",
                    {
                        "id": row.id,
                        "reference": row.reference,
                        "gateway_key": row.refund_key,
                        "amount_cents": row.amount_cents,
                        "currency": row.currency,
                        "status": SUCCEEDED,
                    },
                )
            return _refund_from_row(row)

    def _repeat(self, charge: Charge, amount_cents: int, currency: str, reference: str) -> Charge:
        if charge.voided:
            raise KeyVoided("this gateway key was voided by the merchant; nothing was charged")
        if (charge.amount_cents, charge.currency, charge.reference) != (amount_cents, currency, reference):
            raise KeyReused("this gateway key was used for a different charge")
        if charge.status == DECLINED:
            raise CardDeclined(charge)
        return charge

    def _first_fault(self, gateway_key: str, fault: str) -> bool:
        """True the first time this key meets this fault (remembered across processes)."""
        with Session(self._writer) as session, session.begin():
            inserted = session.execute(
                insert_ignoring_conflicts(GatewayFaultMark, session)
                .values(gateway_key=gateway_key, fault=fault, created_at=utcnow())
                .returning(GatewayFaultMark.gateway_key)
            ).scalar_one_or_none()
        return inserted is not None

    def _insert(
        self,
        gateway_key: str,
        reference: str,
        amount_cents: int,
        currency: str,
        status: str,
        card_last4: str,
        behaviour: str,
    ) -> tuple[Charge | None, bool]:
        """Insert the charge unless the key (or a succeeded charge for the reference) exists.

        Returns the charge under this key and whether this call created it;
        ``None`` if the reference is already charged under another key.
        """
        values = new_charge(gateway_key, reference, amount_cents, currency, status, card_last4, behaviour)
        with self._writer.begin() as connection:  # Core: the ledger's hot path needs no unit of work
            inserted = connection.execute(
                insert_ignoring_conflicts(GatewayCharge, connection, returning=(GatewayCharge.id,)), values
            ).scalar_one_or_none()
            if inserted is not None:  # ours: what we inserted is the row, no need to read it back
                charge = charge_from_row(SimpleNamespace(**values))  # the values inserted are the row
                _event(connection, "charge.succeeded" if status == SUCCEEDED else "charge.failed", _charge_data(charge))
                return charge, True
            row = connection.execute(sa.select(GatewayCharge).where(GatewayCharge.gateway_key == gateway_key)).first()
            return (charge_from_row(row) if row else None), False
