"""The API's cart: PUT and DELETE are idempotent by their meaning (no key), POST adds (twice adds twice), and a
key makes that POST once. The cart is the customer's own, apart from the browser's."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient

from checkout.extensions import db
from checkout.shop.models import Cart, CartLine
from tests.helpers import ALICE, BOB, add_to_cart, race

MUG = "MUG-01"


def cart(client: FlaskClient, headers: dict[str, str] = ALICE) -> Any:
    answer = client.get("/api/cart", headers=headers)
    assert answer.status_code == 200, answer.get_json()
    return answer.get_json()


def put(client: FlaskClient, sku: str, quantity: Any, headers: dict[str, str] = ALICE) -> Any:
    return client.put(f"/api/cart/lines/{sku}", json={"quantity": quantity}, headers=headers)


def version_of(app: Flask, headers: dict[str, str] = ALICE) -> int:
    with app.app_context():
        versions = db.session.scalars(sa.select(Cart.version).where(Cart.api_customer_id.is_not(None))).all()
        return int(versions[0]) if versions else -1


def test_an_empty_cart_reads_as_no_lines_and_zero(client: FlaskClient) -> None:
    assert cart(client) == {"lines": [], "total_cents": 0}


def test_put_twice_leaves_the_same_cart_and_the_second_changes_nothing(client: FlaskClient, app: Flask) -> None:
    first = put(client, MUG, 3)
    assert first.status_code == 200
    version = version_of(app)
    second = put(client, MUG, 3)
    assert second.status_code == 200 and second.get_json() == first.get_json()
    assert first.get_json()["lines"] == [{"sku": MUG, "quantity": 3}]
    assert version_of(app) == version  # not even the version moved: nothing was done the second time
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(CartLine)) == 1


def test_post_twice_gives_double_the_quantity(client: FlaskClient) -> None:
    for _ in range(2):
        assert client.post("/api/cart/lines", json={"sku": MUG, "quantity": 2}, headers=ALICE).status_code == 200
    assert cart(client)["lines"] == [{"sku": MUG, "quantity": 4}]


def test_post_twice_with_one_key_adds_once_and_replays_the_answer(client: FlaskClient) -> None:
    headers = {**ALICE, "Idempotency-Key": "cart-add-key-000001"}
    first = client.post("/api/cart/lines", json={"sku": MUG, "quantity": 2}, headers=headers)
    again = client.post("/api/cart/lines", json={"sku": MUG, "quantity": 2}, headers=headers)
    assert first.status_code == again.status_code == 200
    assert again.headers["Idempotent-Replayed"] == "true" and again.get_data() == first.get_data()
    assert cart(client)["lines"] == [{"sku": MUG, "quantity": 2}]
    other = client.post("/api/cart/lines", json={"sku": MUG, "quantity": 5}, headers=headers)
    assert other.status_code == 422 and other.get_json()["type"].endswith("idempotency-key-reused")


def test_put_then_delete_twice_leaves_no_line_and_both_deletes_answer_204(client: FlaskClient, app: Flask) -> None:
    put(client, MUG, 2)
    first = client.delete(f"/api/cart/lines/{MUG}", headers=ALICE)
    version = version_of(app)
    second = client.delete(f"/api/cart/lines/{MUG}", headers=ALICE)
    assert first.status_code == second.status_code == 204 and second.get_data() == b""
    assert cart(client) == {"lines": [], "total_cents": 0}
    assert version_of(app) == version


def test_two_puts_at_once_leave_one_line(app: Flask) -> None:
    put(app.test_client(), "TEE-01", 1)  # the cart exists: the PUTs below race on the line alone

    def send(_index: int) -> int:
        return int(put(app.test_client(), MUG, 7).status_code)

    assert race(8, send) == [200] * 8
    with app.app_context():
        lines = db.session.execute(sa.select(CartLine.sku, CartLine.quantity).where(CartLine.sku == MUG)).all()
        carts = db.session.scalar(sa.select(sa.func.count()).select_from(Cart))
    assert [tuple(line) for line in lines] == [(MUG, 7)] and carts == 1


def test_first_requests_at_once_make_one_cart(app: Flask) -> None:
    def send(index: int) -> int:
        return int(put(app.test_client(), ("MUG-01", "TEE-01")[index % 2], 1).status_code)

    assert race(8, send) == [200] * 8
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(Cart)) == 1


def test_the_total_is_at_todays_prices(client: FlaskClient) -> None:
    price = next(p["price_cents"] for p in client.get("/api/products").get_json() if p["sku"] == MUG)
    assert put(client, MUG, 3).get_json()["total_cents"] == 3 * price


def test_each_customer_has_their_own_cart_apart_from_the_browsers(client: FlaskClient, app: Flask) -> None:
    add_to_cart(client, MUG)  # a browser's cart, in the same client's cookie
    put(client, "TEE-01", 1)
    assert cart(client)["lines"] == [{"sku": "TEE-01", "quantity": 1}]
    assert cart(client, BOB) == {"lines": [], "total_cents": 0}


def test_an_unknown_product_is_404_for_put_and_422_for_post(client: FlaskClient) -> None:
    assert put(client, "NOPE-01", 1).status_code == 404
    added = client.post("/api/cart/lines", json={"sku": "NOPE-01", "quantity": 1}, headers=ALICE)
    assert added.status_code == 422 and "sku" in added.get_json()["errors"]


def test_a_quantity_outside_1_to_99_is_422_and_changes_nothing(client: FlaskClient) -> None:
    for wrong in (0, 100, "3", True, None):
        answer = put(client, MUG, wrong)
        assert answer.status_code == 422 and "quantity" in answer.get_json()["errors"], wrong
    assert cart(client)["lines"] == []


def test_the_cart_needs_a_bearer_token(client: FlaskClient) -> None:
    assert client.get("/api/cart").status_code == 401
    assert client.put(f"/api/cart/lines/{MUG}", json={"quantity": 1}).status_code == 401
    assert client.delete(f"/api/cart/lines/{MUG}").status_code == 401


@pytest.mark.parametrize("app_overrides", [{"CHECKOUT_RATE_LIMIT": "off"}])
def test_with_the_rate_limit_off_every_write_still_answers(client: FlaskClient, app_overrides: dict[str, Any]) -> None:
    # The limiter reads the token in a transaction of its own; without it, the token's read is still open when
    # the view looks the product up.
    assert put(client, MUG, 2).status_code == 200
    assert client.post("/api/cart/lines", json={"sku": MUG, "quantity": 1}, headers=ALICE).status_code == 200
    keyed = {**ALICE, "Idempotency-Key": "cart-add-no-limit-01"}
    assert client.post("/api/cart/lines", json={"sku": MUG, "quantity": 1}, headers=keyed).status_code == 200
    assert client.delete(f"/api/cart/lines/{MUG}", headers=ALICE).status_code == 204
    assert cart(client) == {"lines": [], "total_cents": 0}
