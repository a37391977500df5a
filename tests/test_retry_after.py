"""Retry-After tells the truth: a duplicate of a payment in progress is told to come back when the holder's
gateway call is expected to be answered, never later than the holder's lease runs out, at least 1 second:
what the server knows, not a constant."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from checkout.idempotency import RecordView, Scope
from checkout.idempotency.units import utcnow
from tests.conftest import LiveServer
from tests.helpers import (
    GOOD_CARD,
    VERY_SLOW_CARD,
    Ledger,
    claim_as_a_dying_worker,
    duplicates_of_a_slow_order,
    order_body,
    post_order,
)


def duplicate_of_a_held_order(
    app: Flask, client: FlaskClient, card: str, lease_seconds: float, headers: dict[str, str] | None = None
) -> Any:
    """A duplicate (with ``headers`` added) of an order whose worker died in its gateway call with ``card``, its
    lease ``lease_seconds`` long: what the duplicate is told."""
    key = str(uuid.uuid4())
    claim_as_a_dying_worker(app, key, order_body(card=card), lease_seconds=lease_seconds)
    return post_order(client, key, order_body(card=card), headers=headers)


@pytest.mark.parametrize("app_overrides", [{"CHECKOUT_SLOW_CARD_SECONDS": 5.0, "CHECKOUT_LEASE_SECONDS": 40.0}])
def test_a_duplicate_is_told_to_come_back_when_the_slow_gateway_should_have_answered(
    live_server: LiveServer, ledger: Ledger, app_overrides: dict[str, Any]
) -> None:
    first, [duplicate] = duplicates_of_a_slow_order(live_server.url, ledger, {})  # sent inside the 5 s call
    assert duplicate.status == 409
    assert 3 <= int(duplicate.headers["Retry-After"]) <= 5  # what is left of the 5 s, not the lease's 30
    assert first.status == 201


@pytest.mark.parametrize("app_overrides", [{"CHECKOUT_VERY_SLOW_CARD_SECONDS": 20.0}])
def test_a_duplicate_is_never_told_to_wait_past_the_holders_lease(
    app: Flask, client: FlaskClient, app_overrides: dict[str, Any]
) -> None:
    duplicate = duplicate_of_a_held_order(app, client, VERY_SLOW_CARD, lease_seconds=4)  # 20 s call, 4 s lease
    assert duplicate.status_code == 409
    assert 1 <= int(duplicate.headers["Retry-After"]) <= 4  # then the lease runs out, and a retry takes over


def test_a_duplicate_of_a_quick_payment_is_told_to_come_back_in_a_second(app: Flask, client: FlaskClient) -> None:
    assert duplicate_of_a_held_order(app, client, GOOD_CARD, lease_seconds=30).headers["Retry-After"] == "1"


@pytest.mark.parametrize("app_overrides", [{"CHECKOUT_VERY_SLOW_CARD_SECONDS": 20.0}])
def test_a_duplicate_that_waited_is_told_when_to_come_back_as_of_its_answer_not_its_arrival(
    app: Flask, client: FlaskClient, app_overrides: dict[str, Any]
) -> None:
    # 20 s call, 8 s lease
    waited = duplicate_of_a_held_order(app, client, VERY_SLOW_CARD, lease_seconds=8, headers={"Prefer": "wait=3"})
    assert waited.status_code == 409
    assert 1 <= int(waited.headers["Retry-After"]) <= 6  # 8 s of lease at its arrival, 3 of them spent waiting


NOW = utcnow()


def view_updated(seconds_ago: float, lease_left: float) -> RecordView:
    """A record whose holder moved to its gateway call ``seconds_ago`` (as of NOW), its lease live."""
    locked_until, updated_at = NOW + timedelta(seconds=lease_left), NOW - timedelta(seconds=seconds_ago)
    scope = Scope("c", "POST /e", "k" * 16)
    return RecordView(1, scope, "f", "in_progress", "order_created", True, "w", locked_until, "ord_1", None, 0, NOW,
                      updated_at)  # fmt: skip


@pytest.mark.parametrize(
    ("called_seconds_ago", "told"),
    [(0.5, 3), (2.9, 1), (3.2, 1), (5.0, 2), (9.0, 3)],
    ids=["early: what is left", "due", "just late: a second", "late 2 s: 2 s", "long late: one more call"],
)
def test_a_holder_past_its_expected_call_is_looked_at_again_soon_not_a_whole_call_later(
    called_seconds_ago: float, told: int
) -> None:
    """Two servers racing for one key with the 3 s card: the loser, told 3, came back just before the holder
    finished, and was told 3 more (6 s in all). Just late, it is told 1."""
    assert view_updated(called_seconds_ago, lease_left=30).retry_after(NOW, expected_call_seconds=3.0) == told
    assert view_updated(9.0, lease_left=1.5).retry_after(NOW, expected_call_seconds=3.0) == 2  # never past the lease
