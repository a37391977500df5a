"""With the lab off its routes do not exist: 404 for every method, as for an address that never had a page.

A 405 (or a CSRF 400, or an OPTIONS answer listing the methods) would tell a visitor the lab is there,
only locked. The lab's addresses are read from an app with the lab on, so a lab route added later is
covered without a new test; the shop's own pages must still render without them."""

from __future__ import annotations

import re
import uuid

import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient

from checkout.database import table_of, writing
from checkout.extensions import db
from checkout.lab.tables import LabOrder, LabRefund, LabStock
from checkout.shop.seed import seed
from tests.helpers import ALICE, checkout_with_a_mug, order_body

LAB_TABLES = (table_of(LabOrder), table_of(LabRefund), table_of(LabStock))
METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS")


def lab_paths(app: Flask) -> list[str]:
    """Every route of the lab (its code lives in checkout.lab, or its address under /lab or /api/lab)."""
    paths = set()
    for rule in app.url_map.iter_rules():
        module = app.view_functions[rule.endpoint].__module__
        if module.startswith("checkout.lab") or rule.rule.startswith(("/lab", "/api/lab")):
            paths.add(re.sub(r"<[^>]+>", "x", rule.rule))
    return sorted(paths)


def test_with_the_lab_off_every_lab_route_answers_404_to_every_method(app: Flask, lab_off: Flask) -> None:
    paths = lab_paths(app)
    assert "/lab" in paths and "/api/lab/ledger" in paths and "/lab/kill-worker" in paths
    client = lab_off.test_client()
    answers = {
        f"{method} {path}": client.open(path, method=method, headers=ALICE).status_code
        for path in paths
        for method in METHODS
    }
    assert {where: status for where, status in answers.items() if status != 404} == {}


def test_with_the_lab_off_the_shop_pages_render_without_a_lab_link(lab_off: Flask) -> None:
    client = lab_off.test_client()
    fields = checkout_with_a_mug(client)
    paid = client.post("/checkout", data={**fields, "email": "s@example.com", "card_number": "4242424242424242"})
    assert paid.status_code == 303, paid.get_data(as_text=True)[:300]
    order = client.post("/api/orders", json=order_body(), headers={**ALICE, "Idempotency-Key": str(uuid.uuid4())})
    pages = ["/", "/cart", "/checkout", "/orders", paid.headers["Location"], "/no-such-page", "/?lang=uk"]
    for page in pages:
        response = client.get(page, follow_redirects=True)
        assert response.status_code in (200, 404), page
        assert 'href="/lab' not in response.get_data(as_text=True), page
    for api in ("/api/products", "/api/orders", order.headers["Location"], "/api/openapi.json", "/metrics"):
        assert client.get(api, headers=ALICE).status_code == 200, api


def test_with_the_lab_on_its_routes_exist(client: FlaskClient) -> None:
    assert client.get("/lab").status_code == 200
    assert client.put("/lab/unsafe-checkout").status_code == 405


def test_with_the_lab_off_an_order_and_a_refund_leave_no_row_in_the_labs_tables(app: Flask, lab_off: Flask) -> None:
    """The lab listens to its own app: an app with the lab on in the same process (``app``) is not told of
    the lab-off app's orders, refunds or stock."""
    client = lab_off.test_client()
    before = _lab_rows(lab_off)
    placed = client.post("/api/orders", json=order_body(), headers={**ALICE, "Idempotency-Key": str(uuid.uuid4())})
    assert placed.status_code == 201
    refunded = client.post(
        f"{placed.headers['Location']}/refunds", json={}, headers={**ALICE, "Idempotency-Key": str(uuid.uuid4())}
    )
    assert refunded.status_code == 201
    with lab_off.app_context(), writing():
        seed(demo_customers=False, reset_stock=True)  # the order took a mug: putting it back is stock seeded
    assert _lab_rows(lab_off) == before


def _lab_rows(app: Flask) -> dict[str, int]:
    """How many rows each lab table holds, and how much stock the lab counts as ever seeded."""
    with app.app_context():
        rows = {t.name: db.session.scalar(sa.select(sa.func.count()).select_from(t)) or 0 for t in LAB_TABLES}
        return {**rows, "seeded": db.session.scalar(sa.select(sa.func.sum(LabStock.seeded))) or 0}
