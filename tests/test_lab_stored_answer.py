"""The lab shows what a record stores: its fingerprint, and once complete the status, the headers that
matter and the body it replays, for this browser's latest payment and for any key asked by ``?key=``."""

from __future__ import annotations

import html
import uuid

from flask.testing import FlaskClient

from tests.helpers import UNAVAILABLE_CARD, Ledger, order_body, post_order


def stored_part(page: str) -> str:
    return page.split('data-testid="stored-answer"', 1)[1].split("</details>", 1)[0]


def test_the_lab_shows_the_status_headers_body_and_fingerprint_an_api_key_stored(
    client: FlaskClient, ledger: Ledger
) -> None:
    key = str(uuid.uuid4())
    answer = post_order(client, key)
    [record] = ledger.records()
    part = stored_part(client.get(f"/lab?key={key}").get_data(as_text=True))
    assert 'data-testid="stored-status">201<' in part
    assert f"Location: {answer.headers['Location']}" in part
    assert html.unescape(part).count(answer.get_data(as_text=True)) == 1  # the body it replays, byte for byte
    assert record.fingerprint in part


def test_before_its_answer_a_record_shows_its_fingerprint_and_that_nothing_is_stored_yet(
    client: FlaskClient, ledger: Ledger
) -> None:
    key = str(uuid.uuid4())
    assert post_order(client, key, order_body(card=UNAVAILABLE_CARD)).status_code == 503  # nothing stored
    [record] = ledger.records()
    part = stored_part(client.get(f"/lab?key={key}").get_data(as_text=True))
    assert record.fingerprint in part and "stored-status" not in part and "none yet" in part


def test_the_lab_has_a_form_that_looks_up_any_key(client: FlaskClient) -> None:
    key = str(uuid.uuid4())
    post_order(client, key)
    page = client.get("/lab").get_data(as_text=True)
    form = page.split('data-testid="key-lookup"', 1)[1].split("</form>", 1)[0]
    assert 'method="get"' in page.split('data-testid="key-lookup"', 1)[0][-200:] and 'name="key"' in form
    assert 'data-testid="stored-status">201<' in client.get("/lab", query_string={"key": key}).get_data(as_text=True)
