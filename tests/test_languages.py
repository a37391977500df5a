"""Which language a page is in: ?lang (remembered), then the remembered choice, then Accept-Language; the API
stays English."""

from __future__ import annotations

import re
import uuid

import pytest
from flask import Flask
from flask.testing import FlaskClient

from checkout.i18n import format_money
from checkout.mail.outbox import OutboxMessage
from tests.helpers import (
    ALICE,
    ANSWER_LOST_CARD,
    Ledger,
    add_to_cart,
    checkout_fields,
    event_of,
    order_body,
    pay_in_browser,
    post_order,
    signed_post,
)


def lang_of(html: str) -> str:
    found = re.search(r'<html lang="([a-z]+)"', html)
    assert found is not None
    return found.group(1)


def test_a_page_is_english_by_default(client: FlaskClient) -> None:
    assert lang_of(client.get("/").get_data(as_text=True)) == "en"


def test_accept_language_chooses_the_language(client: FlaskClient) -> None:
    page = client.get("/", headers={"Accept-Language": "uk-UA,uk;q=0.9,en;q=0.5"}).get_data(as_text=True)
    assert lang_of(page) == "uk"
    assert lang_of(client.get("/", headers={"Accept-Language": "ru"}).get_data(as_text=True)) == "ru"
    assert lang_of(client.get("/", headers={"Accept-Language": "de, fr;q=0.8"}).get_data(as_text=True)) == "en"


def test_lang_in_the_address_wins_over_accept_language_and_is_remembered(client: FlaskClient) -> None:
    assert lang_of(client.get("/?lang=uk", headers={"Accept-Language": "ru"}).get_data(as_text=True)) == "uk"
    assert lang_of(client.get("/cart", headers={"Accept-Language": "ru"}).get_data(as_text=True)) == "uk"
    assert lang_of(client.get("/orders?lang=en").get_data(as_text=True)) == "en"
    assert lang_of(client.get("/").get_data(as_text=True)) == "en"


def test_an_unknown_lang_is_ignored(client: FlaskClient) -> None:
    assert lang_of(client.get("/?lang=xx", headers={"Accept-Language": "ru"}).get_data(as_text=True)) == "ru"


def test_the_switcher_links_to_this_page_in_each_other_language(client: FlaskClient) -> None:
    page = client.get("/cart?lang=ru").get_data(as_text=True)
    switcher = page[page.index('data-testid="language-switcher"') :]
    switcher = switcher[: switcher.index("</nav>")]
    assert 'href="/cart?lang=en"' in switcher and 'href="/cart?lang=uk"' in switcher
    assert 'aria-current="true" lang="ru"' in switcher and "/cart?lang=ru" not in switcher


def test_the_json_api_stays_english_whatever_is_asked(client: FlaskClient) -> None:
    headers = {**ALICE, "Accept-Language": "uk"}
    response = client.post("/api/orders?lang=uk", json={"items": []}, headers={**headers, "Idempotency-Key": "k" * 16})
    assert response.status_code == 422 and response.get_json()["title"] == "Invalid order"
    assert post_order(client, None, headers={"Accept-Language": "ru"}).get_json()["title"] == "Invalid Idempotency-Key"
    assert client.get("/api/nope", headers={"Accept-Language": "uk"}).get_json()["title"] == "Not found"


@pytest.mark.parametrize(("language", "written"), [("en", "$1,234.50"), ("uk", "1 234,50 $"), ("ru", "1 234,50 $")])
def test_money_is_written_with_the_languages_digits_and_the_dollar_sign_in_every_language(
    app: Flask, language: str, written: str
) -> None:
    with app.test_request_context(f"/?lang={language}"):
        assert format_money(123450).replace("\xa0", " ") == written


def test_an_order_paid_by_the_gateways_webhook_is_confirmed_in_its_shoppers_language(
    app: Flask, client: FlaskClient, ledger: Ledger
) -> None:
    client.get("/?lang=uk")  # the shopper reads Ukrainian (remembered in the session)
    add_to_cart(client)
    assert pay_in_browser(client, checkout_fields(client), ANSWER_LOST_CARD).status_code == 503  # charged, unheard
    webhook = app.test_client()  # the gateway: another client, no session, no language
    assert signed_post(webhook, event_of(ledger, "charge.succeeded")).status_code == 200
    [message] = ledger.rows(OutboxMessage)
    assert message.title.startswith("Ваше замовлення") and "сплачено" in message.title
    assert message.body.startswith("Дякуємо за замовлення")


def test_an_api_order_mails_in_the_language_its_accept_language_asks_for_while_the_api_answers_english(
    client: FlaskClient, ledger: Ledger
) -> None:
    answer = post_order(client, str(uuid.uuid4()), order_body(), headers={"Accept-Language": "uk, en;q=0.5"})
    assert answer.status_code == 201
    [mail] = ledger.rows(OutboxMessage)
    assert mail.title.startswith("Ваше замовлення") and answer.get_json()["status"] == "paid"
    refused = post_order(client, str(uuid.uuid4()), {"items": []}, headers={"Accept-Language": "uk"})
    assert refused.status_code == 422 and refused.get_json()["title"].isascii()  # the API itself stays English
