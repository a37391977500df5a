"""The lab's pages in Ukrainian and Russian leak no English words built at run time.

Identifiers stay as they are (event names, ids, SKUs, ``reason=``); the words around them, and the data
words the lab shows (a webhook's result, an audit reason, a checkout path, an order's status), are in the
page's language.
"""

from __future__ import annotations

import re
import uuid
from types import SimpleNamespace
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from checkout.lab.mistakes import views as mistake_views
from tests.helpers import ALICE, ANSWER_LOST_CARD, Ledger, bought, event_of, order_body, post_order, signed_post

LANGUAGES = ("uk", "ru")
WORDS: dict[str, dict[str, str]] = {
    "uk": {
        "paid": "сплачено",
        "card": "картка …4242",
        "applied": "застосовано",
        "answer lost": "reason=платіжний шлюз не відповів вчасно",
        "safe": "безпечне",
        "mistake": "помилка: no-key",
        "not configured": "Redis не налаштовано.",
    },
    "ru": {
        "paid": "оплачен",
        "card": "карта …4242",
        "applied": "применено",
        "answer lost": "reason=платёжный шлюз не ответил вовремя",
        "safe": "безопасное",
        "mistake": "ошибка: no-key",
        "not configured": "Redis не настроен.",
    },
}


def part(page: str, start: str, end: str = "</table>") -> str:
    """The piece of ``page`` from ``start`` to the next ``end``."""
    begin = page.index(start)
    return page[begin : page.index(end, begin)]


def _lost_answer_payment(client: FlaskClient) -> str:
    """A payment whose gateway answer is lost: released with a reason, its charge.succeeded event waiting."""
    key = str(uuid.uuid4())
    assert post_order(client, key, order_body(card=ANSWER_LOST_CARD)).status_code == 503
    return key


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_mistake_pages_answer_column_words_the_order_in_the_pages_language(
    app: Flask, client: FlaskClient, language: str
) -> None:
    answer = post_order(client, str(uuid.uuid4()))
    assert answer.status_code == 201
    form = SimpleNamespace(customer=SimpleNamespace(data="alice"), key=SimpleNamespace(data="k" * 36))
    with app.test_request_context():
        entry = mistake_views._entry("no-key", "safe", form, 201, dict(answer.headers), answer.get_data())  # type: ignore[arg-type]
    with client.session_transaction() as session:
        session[mistake_views.SENT] = [entry]
    shown = part(client.get(f"/lab/mistakes/no-key?lang={language}").get_data(as_text=True), 'data-testid="sent"')
    assert "paid:" not in shown and "card …" not in shown
    assert f"{WORDS[language]['paid']}: 2 × MUG-01, 1 × STK-01, alice@example.com, {WORDS[language]['card']}" in shown


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_labs_webhook_results_are_in_the_pages_language(client: FlaskClient, ledger: Ledger, language: str) -> None:
    _lost_answer_payment(client)
    assert signed_post(client, event_of(ledger, "charge.succeeded")).get_json()["result"] == "applied"
    shown = part(client.get(f"/lab?lang={language}").get_data(as_text=True), 'data-testid="webhooks"')
    assert 'data-testid="webhook-result">applied<' not in shown
    assert f'data-testid="webhook-result">{WORDS[language]["applied"]}<' in shown
    assert 'class="status status-applied"' in shown  # the identifier stays, for the colour


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_timelines_and_audit_trails_reasons_are_in_the_pages_language(client: FlaskClient, language: str) -> None:
    key = _lost_answer_payment(client)
    page = client.get(f"/lab?key={key}&lang={language}").get_data(as_text=True)
    timeline = part(page, 'data-testid="timeline"', "</ol>")
    audit = part(page, 'id="audit-heading"')
    for shown in (timeline, audit):
        assert "reason=the payment gateway did not answer in time" not in shown
        assert WORDS[language]["answer lost"] in shown
    # The JSON API keeps the English reason: it is read by programs.
    events = client.get("/api/lab/ledger").get_json()["events"]
    assert "the payment gateway did not answer in time" in {e.get("reason") for e in events}


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_damage_tables_word_safe_and_mistake_in_the_pages_language(client: FlaskClient, language: str) -> None:
    assert post_order(client, str(uuid.uuid4()), headers=bought("leak-safe")).status_code == 201
    twin = client.post(
        "/api/lab/mistakes/no-key/orders",
        json=order_body(),
        headers={**ALICE, "Idempotency-Key": str(uuid.uuid4()), **bought("leak-twin")},
    )
    assert twin.status_code == 201
    page = client.get(f"/lab?lang={language}").get_data(as_text=True)
    per_checkout = part(page, 'data-testid="damage-totals"')
    per_purchase = part(page, 'data-testid="damage"')
    assert ">safe<" not in per_checkout and f">{WORDS[language]['safe']}<" in per_checkout
    assert f"{WORDS[language]['mistake']}<" in per_checkout
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", per_purchase)  # a cell's text, whatever its attributes
    assert "safe" not in cells and WORDS[language]["safe"] in cells
    assert "mistake:no-key" not in cells and WORDS[language]["mistake"] in cells
    assert 'data-testid="damage-path-safe"' in page and 'data-testid="damage-path-mistake:no-key"' in page


@pytest.mark.parametrize("app_overrides", [{"CHECKOUT_REDIS_URL": ""}])
@pytest.mark.parametrize("language", LANGUAGES)
def test_the_redis_page_says_not_configured_one_way_in_the_pages_language(
    client: FlaskClient, app_overrides: dict[str, Any], language: str
) -> None:
    page = client.get(f"/lab/stores/redis?lang={language}").get_data(as_text=True)
    records = part(page, 'data-testid="redis-records"')
    assert "Redis does not answer" not in page and "не відповідає" not in records and "не отвечает" not in records
    assert WORDS[language]["not configured"] in records
    state = part(page, 'data-testid="redis-store"', "</dl>")
    assert 'data-state="not configured"' in state and "status-failed" not in state  # the default setup, no alarm


@pytest.mark.parametrize(("language", "label"), [("uk", "Розбіжності"), ("ru", "Несовпадения")], ids=LANGUAGES)
def test_the_counters_put_their_label_before_the_number(client: FlaskClient, language: str, label: str) -> None:
    """«Розбіжності: 1», never «1 розбіжності»: a bare number before a noun would need its plural form."""
    key = str(uuid.uuid4())
    assert post_order(client, key).status_code == 201
    assert post_order(client, key, order_body(email="other@example.com")).status_code == 422  # a mismatch
    shown = part(client.get(f"/lab?lang={language}").get_data(as_text=True), 'class="counters"', "</ul>")
    assert f'<strong>{label}:</strong> <span class="count" data-testid="counter-mismatches">1</span>' in shown
