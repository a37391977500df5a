"""The app factory's configuration and the command line."""

from __future__ import annotations

from typing import Any

import pytest
from flask.testing import FlaskCliRunner

from checkout import create_app
from checkout.config import parse_bool
from tests.helpers import ALICE, Ledger, order_body


@pytest.mark.parametrize(
    ("raw", "value"), [("true", True), ("1", True), ("TRUE", True), ("false", False), ("0", False), ("no", False)]
)
def test_booleans_accept_true_false_1_0(raw: str, value: bool) -> None:
    assert parse_bool(raw) is value


def test_a_bad_boolean_is_an_error_at_start(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.setenv("CHECKOUT_LAB", "maybe")
    with pytest.raises(ValueError, match="not a boolean"):
        create_app({"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/x.db", "SECRET_KEY": "k"})


def test_production_refuses_to_start_without_a_secret_key(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.delenv("SECRET_KEY", raising=False)
    monkeypatch.setenv("CHECKOUT_ENV", "production")
    with pytest.raises(RuntimeError, match="SECRET_KEY"):
        create_app({"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/x.db"})


def test_development_keeps_one_generated_secret_in_the_instance_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    monkeypatch.delenv("SECRET_KEY", raising=False)
    monkeypatch.delenv("CHECKOUT_ENV", raising=False)
    first = create_app({"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/x.db"})
    # A second worker reading the same instance folder gets the same secret.
    from checkout.config import development_secret

    assert development_secret(first.instance_path) == first.config["SECRET_KEY"]


def test_environment_settings_are_read_and_typed(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.setenv("CHECKOUT_LEASE_SECONDS", "2.5")
    monkeypatch.setenv("CHECKOUT_KEY_LIFETIME_SECONDS", "60")
    monkeypatch.setenv("CHECKOUT_LAB", "0")
    app = create_app({"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/x.db", "SECRET_KEY": "k"})
    assert app.config["CHECKOUT_LEASE_SECONDS"] == 2.5
    assert app.config["CHECKOUT_KEY_LIFETIME_SECONDS"] == 60
    assert app.config["CHECKOUT_LAB"] is False


@pytest.mark.parametrize("app_overrides", [{"CHECKOUT_LAB": False}])
def test_with_the_lab_off_every_lab_route_is_404(client, app_overrides: dict[str, Any]) -> None:
    assert client.get("/lab").status_code == 404
    assert client.get("/api/lab/ledger").status_code == 404
    assert b"/lab" not in client.get("/").get_data()


def test_seed_is_safe_to_run_twice(runner: FlaskCliRunner, client) -> None:
    assert "0 new products" in runner.invoke(args=["seed"]).output
    assert len(client.get("/api/products").get_json()) == 10


def test_purge_removes_expired_completed_records_only(app, client, runner: FlaskCliRunner, ledger: Ledger) -> None:
    from datetime import timedelta

    import sqlalchemy as sa

    from checkout.database import utcnow
    from checkout.extensions import db
    from checkout.idempotency import IdempotencyRecord, Scope, Settings, claim

    client.post("/api/orders", json=order_body(), headers={**ALICE, "Idempotency-Key": "k" * 20})
    with app.app_context():
        claim(Scope("cus_x", "POST /api/orders", "unfinished-key-0001"), "f" * 64, Settings())
        db.session.execute(sa.update(IdempotencyRecord).values(expires_at=utcnow() - timedelta(seconds=1)))
        db.session.commit()
    result = runner.invoke(args=["idempotency", "purge"])
    assert "purged 1" in result.output
    assert [r.key for r in ledger.records()] == ["unfinished-key-0001"]
    assert len(ledger.orders()) == 1


def test_a_retry_after_the_purge_gets_the_existing_order_not_a_second_one(
    app, client, runner: FlaskCliRunner, ledger: Ledger
) -> None:
    from datetime import timedelta

    import sqlalchemy as sa

    from checkout.database import utcnow
    from checkout.extensions import db
    from checkout.idempotency import IdempotencyRecord

    key = "late-retry-key-000001"
    first = client.post("/api/orders", json=order_body(), headers={**ALICE, "Idempotency-Key": key})
    with app.app_context():
        db.session.execute(sa.update(IdempotencyRecord).values(expires_at=utcnow() - timedelta(seconds=1)))
        db.session.commit()
    runner.invoke(args=["idempotency", "purge"])
    late = client.post("/api/orders", json=order_body(), headers={**ALICE, "Idempotency-Key": key})
    assert late.status_code == 201
    assert late.get_json() == first.get_json()
    assert len(ledger.orders()) == 1 and len(ledger.succeeded_charges()) == 1
