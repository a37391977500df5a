"""One schema per body and answer (checkout/shop/schemas.py): the model that validates a request or writes an
answer is the schema the served document publishes, and its errors are this shop's, per field."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from flask.testing import FlaskClient
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from tests.helpers import ALICE, order_body, post_order
from tests.payments import payment_body, post_payment


@pytest.fixture
def answer_is_valid(client: FlaskClient) -> Any:
    """Checks a body against a schema of the document ``client`` serves, $refs and all."""
    document = client.get("/api/openapi.json").get_json()
    registry: Registry[Any] = Registry().with_resource(
        "urn:checkout-api", Resource.from_contents(document, default_specification=DRAFT202012)
    )

    def check(schema: str, body: Any) -> None:
        validator = Draft202012Validator({"$ref": f"urn:checkout-api#/components/schemas/{schema}"}, registry=registry)
        assert [error.message for error in validator.iter_errors(body)] == []

    return check


def key() -> str:
    return str(uuid.uuid4())


def test_a_paid_order_a_refund_and_a_payment_are_what_the_document_says(
    client: FlaskClient, answer_is_valid: Any
) -> None:
    order = post_order(client, key())
    assert order.status_code == 201
    answer_is_valid("Order", order.get_json())
    refund = client.post(
        f"/api/orders/{order.get_json()['id']}/refunds",
        json={"amount_cents": 100, "reason": "chipped"},
        headers={**ALICE, "Idempotency-Key": key()},
    )
    assert refund.status_code == 201
    answer_is_valid("Refund", refund.get_json())
    answer_is_valid("Order", client.get(f"/api/orders/{order.get_json()['id']}", headers=ALICE).get_json())
    payment = post_payment(client, key(), payment_body())
    assert payment.status_code == 201
    answer_is_valid("Payment", payment.get_json())


def test_an_invalid_body_is_a_problem_the_document_describes(client: FlaskClient, answer_is_valid: Any) -> None:
    invalid = post_order(client, key(), order_body(email="not-an-email"))
    assert invalid.status_code == 422 and invalid.mimetype == "application/problem+json"
    answer_is_valid("InvalidProblem", invalid.get_json())


def test_a_field_left_out_is_named_as_required(client: FlaskClient) -> None:
    body = order_body()
    del body["email"]
    answer = post_order(client, key(), body)
    assert answer.status_code == 422 and answer.get_json()["errors"] == {"email": ["is required"]}


def test_a_line_that_is_no_object_is_named_by_its_place(client: FlaskClient) -> None:
    answer = post_order(client, key(), order_body(items=[{"sku": "MUG-01", "quantity": 1}, "MUG-02"]))
    assert answer.status_code == 422 and answer.get_json()["errors"] == {"items[1]": ["must be a JSON object"]}


def test_each_field_error_is_the_shops_own_message_not_the_librarys(client: FlaskClient) -> None:
    answer = post_order(client, key(), order_body(items=[{"sku": "mug", "quantity": 0}]))
    assert answer.get_json()["errors"] == {
        "items[0].sku": ["must be a product code like MUG-01"],
        "items[0].quantity": ["must be a whole number from 1 to 99"],
    }


def test_a_payment_without_a_card_is_paid_with_the_default_card_and_the_document_names_no_default(
    client: FlaskClient,
) -> None:
    body = payment_body()
    body.pop("card_number", None)
    assert post_payment(client, key(), body).status_code == 201
    card = client.get("/api/openapi.json").get_json()["components"]["schemas"]["PaymentRequest"]["properties"]
    assert "default" not in card["card_number"]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("amount", "49900", "must be a whole number of minor units from 1 to 1,000,000,000"),
        ("amount", 0, "must be a whole number of minor units from 1 to 1,000,000,000"),
        ("currency", "EUR", "must be one of UAH, USD"),
        ("orderId", "order 123", "must be your own reference for the order: 1 to 64 visible ASCII characters"),
    ],
)
def test_a_field_that_breaks_any_of_its_rules_is_told_its_rule_in_the_shops_words(
    client: FlaskClient, field: str, value: object, message: str
) -> None:
    answer = post_payment(client, key(), {**payment_body(), field: value})
    assert answer.status_code == 422 and answer.get_json()["errors"] == {field: [message]}


@pytest.mark.parametrize("items", [[], "MUG-01", [{"sku": "MUG-01", "quantity": 1}] * 51])
def test_an_order_with_no_lines_or_too_many_is_told_how_many_it_may_have(client: FlaskClient, items: Any) -> None:
    answer = post_order(client, key(), order_body(items=items))
    assert answer.status_code == 422 and answer.get_json()["errors"] == {"items": ["must be a list of 1 to 50 lines"]}


def test_an_order_of_fifty_lines_is_within_the_limit(client: FlaskClient) -> None:
    items = [{"sku": f"NONE-{n:02d}", "quantity": 1} for n in range(50)]  # well formed, none of them sold here
    answer = post_order(client, key(), order_body(items=items))
    assert answer.status_code == 422 and "items" not in answer.get_json()["errors"]
