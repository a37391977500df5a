"""Without a browser, the moments each layer of the defence exists for.

Each test sets up the one situation in which its layer decides the outcome, so
it fails when that layer is removed (``make mutants`` checks that it does). The
browser versions are in tests/browser/test_layers.py.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from tests.conftest import LiveServer
from tests.helpers import (
    ALICE,
    SLOW_CARD,
    Ledger,
    SameInstantLooks,
    checkout_with_a_mug,
    first_in_progress,
    order_body,
    pay_in_browser,
    race,
    take_over_the_payment,
)
from tests.http import post_json

ROOT = Path(__file__).resolve().parent.parent
NODE = shutil.which("node")

# static/checkout.js run by Node.js on the smallest DOM it uses: a form, its Pay button, the window.
CHECKOUT_JS_HARNESS = r"""
const vm = require("vm");
const source = require("fs").readFileSync(0, "utf8");
const attributes = {"data-busy-label": "Processing payment…"};
const button = {
  disabled: false,
  textContent: "Pay $14.00",
  getAttribute: (name) => (name in attributes ? attributes[name] : null),
  setAttribute: (name, value) => { attributes[name] = String(value); },
};
const listeners = {};
const formAttributes = {"data-button-guard": "on"};  // the lab can turn it off for one browser
const form = {
  addEventListener: (type, listener) => { (listeners[type] = listeners[type] || []).push(listener); },
  getAttribute: (name) => (name in formAttributes ? formAttributes[name] : null),
  querySelector: (selector) => (selector === "[data-testid='pay-button']" ? button : null),
};
const document = {getElementById: (id) => (id === "checkout-form" ? form : null)};
const window = {addEventListener: () => {}};
vm.runInNewContext(source, {document, window});
const loaded = {disabled: button.disabled};
(listeners.submit || []).forEach((listener) => listener({type: "submit"}));
console.log(JSON.stringify({
  loaded,
  submitted: {disabled: button.disabled, busy: attributes["aria-busy"] || null, label: button.textContent},
}));
"""


@pytest.mark.server
@pytest.mark.skipif(NODE is None, reason="needs Node.js (node) to run static/checkout.js outside a browser")
def test_submitting_the_checkout_form_disables_the_pay_button() -> None:
    """The button guard, on its own: once the form is submitted, Pay cannot be pressed again."""
    assert NODE is not None
    script = (ROOT / "static" / "checkout.js").read_text()
    run = subprocess.run(
        [NODE, "-e", CHECKOUT_JS_HARNESS], input=script, capture_output=True, text=True, timeout=30, check=True
    )
    state = json.loads(run.stdout)
    assert state["loaded"] == {"disabled": False}  # loading the page leaves Pay pressable
    assert state["submitted"] == {"disabled": True, "busy": "true", "label": "Processing payment…"}


def test_two_requests_that_look_at_the_same_instant_pay_once_and_the_loser_replays(
    live_server: LiveServer, ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The atomic claim: both requests find no record; the INSERT decides, and the loser waits for the winner."""
    looks = SameInstantLooks(2).install(monkeypatch)
    headers = {**ALICE, "Idempotency-Key": str(uuid.uuid4()), "Prefer": "wait=10"}
    replies = race(2, lambda _i: post_json(f"{live_server.url}/api/orders", order_body(card=SLOW_CARD), headers))

    assert looks.met  # both looked before either claimed: the claim had to decide
    assert [r.status for r in replies] == [201, 201]
    assert replies[0].body == replies[1].body  # one order, the same answer byte for byte
    assert sorted(r.headers.get("Idempotent-Replayed", "no") for r in replies) == ["no", "true"]
    assert len(ledger.records()) == 1
    assert ledger.events().count("claimed") == 1
    assert len(ledger.orders()) == 1 and len(ledger.succeeded_charges()) == 1


def test_a_resubmitted_checkout_form_with_another_card_is_refused_and_charges_nothing(
    client: FlaskClient, ledger: Ledger
) -> None:
    """The fingerprint, for the browser endpoint: the same key with another card is not a retry."""
    fields = checkout_with_a_mug(client)
    paid = pay_in_browser(client, fields)
    assert paid.status_code == 303
    [before] = ledger.records()

    other = pay_in_browser(client, fields, card="5555 5555 5555 4444")
    assert other.status_code == 422
    assert "already started with other details" in other.get_data(as_text=True)
    [after] = ledger.records()
    assert (after.fingerprint, after.response_body) == (before.fingerprint, before.response_body)
    assert "mismatch" in ledger.events()
    assert len(ledger.orders()) == 1 and len(ledger.charges()) == 1


@pytest.mark.parametrize("app_overrides", [{"CHECKOUT_SLOW_CARD_SECONDS": 3}])
def test_an_api_payment_whose_lease_was_taken_over_mid_charge_writes_nothing(
    app: Flask, live_server: LiveServer, ledger: Ledger, app_overrides: dict[str, Any]
) -> None:
    """The owner check: a worker that lost its lease while it waited on the gateway records nothing."""
    key = str(uuid.uuid4())
    url = f"{live_server.url}/api/orders"
    # The block runs once the worker is inside the gateway call (3 s).
    with first_in_progress(url, order_body(card=SLOW_CARD), key, until=ledger.at_the_gateway) as answer:
        new_owner = take_over_the_payment(app)  # its lease ran out; another worker holds the payment now
        reply = answer.result(timeout=30)

    assert reply.status == 409 and reply.headers["Retry-After"]  # in progress: under the new owner
    [record] = ledger.records()
    assert (record.state, record.locked_by, record.response_status) == ("in_progress", new_owner.owner, None)
    [order] = ledger.orders()
    assert order.status == "pending"  # the charge it got is the new owner's to record
    assert ledger.events().count("lease_lost") == 1

    with app.app_context():
        new_owner.release("the test's worker stops here")
    retry = post_json(f"{live_server.url}/api/orders", order_body(card=SLOW_CARD), {**ALICE, "Idempotency-Key": key})
    assert retry.status == 201 and retry.json()["status"] == "paid"  # the retry resumes: one charge, found again
    assert len(ledger.succeeded_charges()) == 1
