"""Every request the shop sends itself goes to a configured address, never to one a request names.

The "attacker" here is a second server on 127.0.0.1: a forged ``Host`` header
names it, and it records whatever reaches it (answering 200, as an attacker
would, so a signed event sent there would be marked delivered and never
applied). The configured shop is the live server (``CHECKOUT_SHOP_URL``).
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from checkout import create_app
from checkout.gateway.relay import PATH, webhook_url
from checkout.shop.models import Order
from tests.conftest import LiveServer
from tests.helpers import (
    ALICE,
    ANSWER_LOST_CARD,
    GOOD_CARD,
    Ledger,
    event_of,
    form_fields,
    order_body,
    post_order,
    wait_for,
)
from tests.relays import RelayProcess

STRONG = "3f9c1e7a0b5d4c2e8f6a1b3c5d7e9f0a2b4c6d8e0f1a3b5c"


@dataclass
class Catcher:
    """A server that records every request it gets: (method, path, headers)."""

    url: str = ""
    seen: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def requests(self) -> list[tuple[str, str, dict[str, str]]]:
        with self.lock:
            return list(self.seen)


@pytest.fixture
def attacker() -> Iterator[Catcher]:
    caught = Catcher()

    class Record(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with caught.lock:
                caught.seen.append(("POST", self.path, dict(self.headers)))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Record)
    caught.url = f"http://127.0.0.1:{server.server_port}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield caught
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


def lab_csrf(client: FlaskClient, base_url: str) -> str:
    return form_fields(client.get("/lab", base_url=base_url).get_data(as_text=True), form_id=None)["csrf_token"]


def order_status(ledger: Ledger) -> str:
    [order] = ledger.rows(Order)
    return str(order.status)


# --- the webhook relay ---------------------------------------------------------------------


@pytest.mark.server
def test_a_forged_host_on_the_first_request_never_changes_where_the_relay_delivers(
    app: Flask,
    client: FlaskClient,
    live_server: LiveServer,
    attacker: Catcher,
    ledger: Ledger,
    relays: tuple[RelayProcess, RelayProcess],
) -> None:
    # The worker's very first request names the attacker's host; the relay is a process of its own, which
    # never sees a request at all, and delivers where the configuration says.
    assert client.get("/api/products", base_url=attacker.url).status_code == 200
    assert post_order(client, str(uuid.uuid4()), order_body(card=ANSWER_LOST_CARD)).status_code == 503
    wait_for(lambda: live_server.post_count(PATH) or attacker.requests())
    assert attacker.requests() == []
    assert webhook_url(app) == f"{live_server.url}{PATH}"
    wait_for(lambda: order_status(ledger) == "paid")  # the event reached this shop and was applied


def test_the_webhook_url_is_checkout_webhook_url_else_the_shop_urls_own(tmp_path: Any) -> None:
    database = {"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/x.db", "SECRET_KEY": STRONG}
    shop = create_app({**database, "CHECKOUT_SHOP_URL": "https://shop.internal:8443/"})
    assert webhook_url(shop) == "https://shop.internal:8443/webhooks/gateway"
    elsewhere = create_app({**database, "CHECKOUT_WEBHOOK_URL": "https://hooks.internal/in"})
    assert webhook_url(elsewhere) == "https://hooks.internal/in"


@pytest.mark.parametrize("value", ["127.0.0.1:5000", "ftp://shop.example", "http://", "https:///path", "shop"])
def test_checkout_shop_url_must_be_an_http_url_with_a_host(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, value: str
) -> None:
    monkeypatch.setenv("CHECKOUT_SHOP_URL", value)
    with pytest.raises(ValueError, match=r"CHECKOUT_SHOP_URL=.* is not valid: .*http"):
        create_app({"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/x.db", "SECRET_KEY": STRONG})


# --- the lab's buttons ----------------------------------------------------------------------


def test_the_labs_deliver_now_posts_to_the_configured_shop_not_the_requests_host(
    client: FlaskClient, live_server: LiveServer, attacker: Catcher, ledger: Ledger
) -> None:
    assert post_order(client, str(uuid.uuid4()), order_body(card=ANSWER_LOST_CARD)).status_code == 503
    csrf = lab_csrf(client, attacker.url)
    answer = client.post("/lab/webhooks/deliver", data={"csrf_token": csrf}, base_url=attacker.url)
    assert answer.status_code == 303
    assert attacker.requests() == []
    assert live_server.post_count(PATH) >= 1
    assert order_status(ledger) == "paid"


def test_the_labs_redeliver_posts_to_the_configured_shop_not_the_requests_host(
    client: FlaskClient, live_server: LiveServer, attacker: Catcher, ledger: Ledger
) -> None:
    assert post_order(client, str(uuid.uuid4()), order_body(card=ANSWER_LOST_CARD)).status_code == 503
    event = event_of(ledger, "charge.succeeded")
    csrf = lab_csrf(client, attacker.url)
    answer = client.post(f"/lab/webhooks/{event['id']}/redeliver", data={"csrf_token": csrf}, base_url=attacker.url)
    assert answer.status_code == 303
    assert attacker.requests() == []
    assert live_server.post_count(PATH) == 1
    assert order_status(ledger) == "paid"


def test_a_mistake_pages_send_goes_to_the_configured_shop_and_never_shows_the_token_to_the_requests_host(
    client: FlaskClient, live_server: LiveServer, attacker: Catcher
) -> None:
    page = "/lab/mistakes/no-fingerprint"
    fields = form_fields(client.get(page, base_url=attacker.url).get_data(as_text=True), form_id=None)
    form = {
        "csrf_token": fields["csrf_token"],
        "key": fields["key"],
        "customer": "alice",
        "card": GOOD_CARD,
        "quantity": "2",
        "copies": "1",
        "wrong": "pressed",
    }
    assert client.post(f"{page}/send", data=form, base_url=attacker.url).status_code == 303
    assert attacker.requests() == []  # no request, no bearer token
    assert live_server.post_count("/api/lab/mistakes/no-fingerprint/orders") == 1


# --- production refuses what is unsafe -------------------------------------------------------


def production_environment(monkeypatch: pytest.MonkeyPatch, **settings: str) -> None:
    monkeypatch.setenv("CHECKOUT_ENV", "production")
    monkeypatch.setenv("SECRET_KEY", STRONG)
    monkeypatch.setenv("CHECKOUT_FINGERPRINT_SECRET", STRONG[::-1])
    monkeypatch.setenv("CHECKOUT_WEBHOOK_SECRET", "b" + STRONG[1:][::-1])
    for name, value in settings.items():
        monkeypatch.setenv(name, value)


def test_the_production_relay_refuses_to_start_without_checkout_webhook_url(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    # The web process starts (it delivers nothing); the relay process, where deliveries happen, refuses.
    production_environment(monkeypatch, CHECKOUT_TRUSTED_HOSTS="shop.example")
    app = create_app({"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/p.db"})
    result = app.test_cli_runner().invoke(args=["gateway", "deliver", "--forever"])
    assert result.exit_code != 0
    assert "CHECKOUT_ENV=production needs CHECKOUT_WEBHOOK_URL" in result.output


def test_production_refuses_to_start_without_checkout_trusted_hosts(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    production_environment(monkeypatch)
    with pytest.raises(ValueError, match="CHECKOUT_TRUSTED_HOSTS"):
        create_app({"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/p.db"})


def test_production_starts_with_the_webhook_url_and_the_trusted_hosts(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    production_environment(
        monkeypatch,
        CHECKOUT_WEBHOOK_URL="https://shop.example/webhooks/gateway",
        CHECKOUT_TRUSTED_HOSTS=" shop.example, .shop.example ",
    )
    app = create_app({"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/p.db"})
    assert app.config["TRUSTED_HOSTS"] == ["shop.example", ".shop.example"]
    assert webhook_url(app) == "https://shop.example/webhooks/gateway"


@pytest.mark.parametrize(
    ("name", "url"),
    [("CHECKOUT_WEBHOOK_URL", "http://10.0.0.5:8000/webhooks/gateway"), ("CHECKOUT_SHOP_URL", "http://127.0.0.1:5000")],
)
def test_trusted_hosts_that_leave_out_the_shops_own_addresses_are_refused_at_start(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, name: str, url: str
) -> None:
    monkeypatch.setenv("CHECKOUT_TRUSTED_HOSTS", "shop.example")
    monkeypatch.setenv(name, url)
    with pytest.raises(ValueError, match=rf"{name}'s host .* is not in CHECKOUT_TRUSTED_HOSTS"):
        create_app({"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/x.db", "SECRET_KEY": STRONG})


def test_gateway_deliver_in_production_without_a_webhook_url_says_which_setting_is_missing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    production_environment(monkeypatch, CHECKOUT_TRUSTED_HOSTS="shop.example")  # the web process starts
    app = create_app({"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/p.db"})
    result = app.test_cli_runner().invoke(args=["gateway", "deliver"])
    assert result.exit_code != 0
    assert "CHECKOUT_WEBHOOK_URL" in result.output


# --- the Host allow-list ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "app_overrides", [{"CHECKOUT_TRUSTED_HOSTS": "shop.example", "CHECKOUT_SHOP_URL": "https://shop.example"}]
)
def test_a_host_outside_checkout_trusted_hosts_gets_400_and_nothing_is_written(
    client: FlaskClient, ledger: Ledger, app_overrides: dict[str, Any]
) -> None:
    key = str(uuid.uuid4())
    forged = client.post(
        "/api/orders", json=order_body(), headers={**ALICE, "Idempotency-Key": key}, base_url="http://evil.example"
    )
    assert forged.status_code == 400 and forged.mimetype == "application/problem+json"
    assert ledger.orders() == [] and ledger.records() == [] and ledger.charges() == []
    trusted = client.post(
        "/api/orders", json=order_body(), headers={**ALICE, "Idempotency-Key": key}, base_url="https://shop.example"
    )
    assert trusted.status_code == 201
    assert len(ledger.orders()) == 1


@pytest.mark.parametrize(
    "app_overrides",
    [{"CHECKOUT_TRUSTED_HOSTS": "shop.example", "CHECKOUT_SHOP_URL": "https://shop.example", "TESTING": False}],
)
def test_a_browser_page_with_a_host_outside_checkout_trusted_hosts_gets_a_400_page(
    client: FlaskClient, app_overrides: dict[str, Any]
) -> None:
    page = client.get("/", base_url="http://evil.example")
    assert (page.status_code, page.mimetype) == (400, "text/html")
    assert 'data-testid="error-message"' in page.get_data(as_text=True)


def test_host_names_are_matched_whatever_their_case(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    production_environment(monkeypatch, CHECKOUT_TRUSTED_HOSTS="shop.example")
    client = create_app({"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/p.db"}).test_client()
    assert client.get("/api/openapi.json", headers={"Host": "SHOP.Example"}).status_code == 200
    assert client.get("/api/openapi.json", headers={"Host": "other.example"}).status_code == 400


@pytest.mark.parametrize("hosts", ["*", ".", "*.shop.example", "shop.example, *"])
def test_a_wildcard_trusted_host_is_refused_at_start(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, hosts: str
) -> None:
    production_environment(monkeypatch, CHECKOUT_TRUSTED_HOSTS=hosts)
    with pytest.raises(ValueError, match="would trust any Host header"):
        create_app({"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/p.db"})


@pytest.mark.parametrize("same_as", ["SECRET_KEY", "CHECKOUT_FINGERPRINT_SECRET"])
def test_production_refuses_a_webhook_secret_equal_to_another_secret(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, same_as: str
) -> None:
    production_environment(monkeypatch, CHECKOUT_TRUSTED_HOSTS="shop.example")
    monkeypatch.setenv("CHECKOUT_WEBHOOK_SECRET", os.environ[same_as])
    with pytest.raises(ValueError, match="CHECKOUT_WEBHOOK_SECRET must differ"):
        create_app({"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/p.db"})
