"""The app factory's configuration and the command line."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest
from flask.testing import FlaskCliRunner

from checkout import create_app
from checkout.config import parse_bool, settings
from checkout.extensions import db
from checkout.lab.proxy import wait_cap
from tests.helpers import ALICE, Ledger, order_body, post_order, purge_every_record


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
    with pytest.raises(ValueError, match="SECRET_KEY"):
        create_app({"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/x.db"})


def test_development_keeps_one_generated_secret_in_the_instance_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    monkeypatch.delenv("SECRET_KEY", raising=False)
    monkeypatch.delenv("CHECKOUT_ENV", raising=False)
    first = create_app({"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/x.db"})
    second = create_app({"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/x.db"})  # another worker, same folder
    assert first.config["SECRET_KEY"] == second.config["SECRET_KEY"]
    assert settings(first).fingerprint_secret == settings(second).fingerprint_secret
    assert first.config["SECRET_KEY"] != settings(first).fingerprint_secret


def test_environment_settings_are_read_and_typed(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.setenv("CHECKOUT_LEASE_SECONDS", "40.5")
    monkeypatch.setenv("CHECKOUT_KEY_LIFETIME_SECONDS", "60")
    monkeypatch.setenv("CHECKOUT_LAB", "0")
    app = create_app({"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/x.db", "SECRET_KEY": "k"})
    assert settings(app).lease_seconds == 40.5
    assert settings(app).key_lifetime_seconds == 60
    assert settings(app).lab is False


@pytest.mark.parametrize("app_overrides", [{"CHECKOUT_LAB": False}])
def test_with_the_lab_off_every_lab_route_is_404(client, app_overrides: dict[str, Any]) -> None:
    assert client.get("/lab").status_code == 404
    assert client.get("/api/lab/ledger").status_code == 404
    assert b"/lab" not in client.get("/").get_data()


def test_seed_is_safe_to_run_twice(runner: FlaskCliRunner, client) -> None:
    assert "0 new products" in runner.invoke(args=["seed"]).output
    assert len(client.get("/api/products").get_json()) == 11


def test_purge_removes_expired_completed_records_only(app, client, runner: FlaskCliRunner, ledger: Ledger) -> None:
    from tests.helpers import claim_as_a_dying_worker

    client.post("/api/orders", json=order_body(), headers={**ALICE, "Idempotency-Key": "k" * 20})
    claim_as_a_dying_worker(app, "unfinished-key-0001")
    assert "purged 1" in purge_every_record(app, runner)
    assert [r.key for r in ledger.records()] == ["unfinished-key-0001"]
    assert len(ledger.orders()) == 2  # the paid one (its record purged) and the unfinished one


def test_a_retry_after_the_purge_gets_the_existing_order_not_a_second_one(
    app, client, runner: FlaskCliRunner, ledger: Ledger
) -> None:
    first = post_order(client, "late-retry-key-000001")
    purge_every_record(app, runner)
    late = post_order(client, "late-retry-key-000001")
    assert (late.status_code, late.get_json()) == (201, first.get_json())
    assert len(ledger.orders()) == 1 and len(ledger.succeeded_charges()) == 1


def test_after_the_purge_another_body_under_the_old_key_is_422_and_the_first_body_still_gets_its_order(
    app, client, runner: FlaskCliRunner, ledger: Ledger
) -> None:
    first = post_order(client, "late-retry-key-000002")
    purge_every_record(app, runner)
    other = post_order(client, "late-retry-key-000002", order_body(email="mallory@example.com"))
    assert (other.status_code, other.get_json()["type"]) == (422, "idempotency-key-reused")
    assert ledger.records() == []  # nothing stored under the key for the other body
    again = post_order(client, "late-retry-key-000002")
    assert (again.status_code, again.get_json()) == (201, first.get_json())
    assert len(ledger.orders()) == 1 and len(ledger.succeeded_charges()) == 1


STRONG = "3f9c1e7a0b5d4c2e8f6a1b3c5d7e9f0a2b4c6d8e0f1a3b5c"


def production_app(monkeypatch: pytest.MonkeyPatch, tmp_path: Any, env: str = "production") -> Any:
    monkeypatch.setenv("CHECKOUT_ENV", env)
    monkeypatch.setenv("SECRET_KEY", STRONG)
    monkeypatch.setenv("CHECKOUT_FINGERPRINT_SECRET", STRONG[::-1])
    monkeypatch.setenv("CHECKOUT_WEBHOOK_SECRET", "b" + STRONG[1:][::-1])
    monkeypatch.setenv("CHECKOUT_TRUSTED_HOSTS", "shop.example,localhost")  # localhost: the test client's Host
    app = create_app({"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/p.db"})
    with app.app_context():
        db.create_all()
    return app


def test_production_session_cookies_are_secure(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    app = production_app(monkeypatch, tmp_path)
    assert app.config["SESSION_COOKIE_SECURE"] is True
    response = app.test_client().get("/", base_url="https://shop.example")
    assert "Secure" in response.headers["Set-Cookie"]


@pytest.mark.parametrize("spelling", ["Production", "PRODUCTION", " production", "production\n"])
def test_checkout_env_is_normalised_so_production_is_production_however_it_is_written(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, spelling: str
) -> None:
    app = production_app(monkeypatch, tmp_path, spelling)
    assert settings(app).env == "production"
    assert settings(app).lab is False
    assert app.test_client().get("/lab").status_code == 404
    assert app.test_client().get("/api/orders", headers=ALICE).status_code == 401  # no demo tokens


@pytest.mark.parametrize("spelling", ["prod", "staging", "develop", ""])
def test_an_unknown_checkout_env_is_refused_at_start(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, spelling: str
) -> None:
    monkeypatch.setenv("CHECKOUT_ENV", spelling)
    with pytest.raises(ValueError, match="CHECKOUT_ENV"):
        create_app({"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/x.db", "SECRET_KEY": STRONG})


def test_an_unknown_checkout_variable_is_refused_with_the_likely_name(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    monkeypatch.setenv("CHECKOUT_LEASE_SECOND", "60")  # a typo of CHECKOUT_LEASE_SECONDS
    with pytest.raises(ValueError, match=r"CHECKOUT_LEASE_SECOND.*CHECKOUT_LEASE_SECONDS"):
        create_app({"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/x.db", "SECRET_KEY": STRONG})


@pytest.mark.parametrize(
    ("name", "value"), [("CHECKOUT_LEASE_SECONDS", "soon"), ("CHECKOUT_KEY_LIFETIME_SECONDS", "-5")]
)
def test_a_setting_that_is_not_a_valid_value_is_refused_with_its_name(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=name):
        create_app({"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/x.db", "SECRET_KEY": STRONG})


def test_a_setting_that_is_gone_is_refused_saying_what_replaced_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    monkeypatch.setenv("CHECKOUT_WEBHOOK_RELAY", "off")  # the relay is a process now, never a thread
    with pytest.raises(ValueError, match=r"CHECKOUT_WEBHOOK_RELAY is no longer a setting: .*gateway deliver --forever"):
        create_app({"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/x.db", "SECRET_KEY": STRONG})


def test_checkout_outbox_relay_off_is_accepted_as_exercise_9_starts_the_shop(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    monkeypatch.setenv("CHECKOUT_OUTBOX_RELAY", "off")  # make run then starts no outbox relay process
    app = create_app({"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/x.db", "SECRET_KEY": STRONG})
    assert settings(app).outbox_relay is False


def test_checkout_outbox_relay_thread_the_old_development_default_still_starts_the_shop(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """The spec's name for the development default: the relay runs, as its own process now."""
    monkeypatch.setenv("CHECKOUT_OUTBOX_RELAY", "thread")
    app = create_app({"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/x.db", "SECRET_KEY": STRONG})
    assert settings(app).outbox_relay is True


@pytest.mark.server
def test_the_flask_command_says_what_to_fix_in_one_line_per_setting_not_a_traceback(tmp_path: Any) -> None:
    env = {
        **{name: value for name, value in os.environ.items() if not name.startswith("CHECKOUT_")},
        "CHECKOUT_INSTANCE_PATH": str(tmp_path / "instance"),
        "CHECKOUT_LEASE_SECONDS": "soon",
        "CHECKOUT_WEBHOOK_DUPLICATE_RATE": "2",
    }
    seeded = subprocess.run(
        [sys.executable, "-m", "flask", "--app", "checkout", "seed"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert seeded.returncode != 0
    assert "Traceback" not in seeded.stderr and "pydantic" not in seeded.stderr, seeded.stderr
    lines = seeded.stderr.strip().splitlines()
    assert lines[0].startswith("Error: CHECKOUT_LEASE_SECONDS='soon' is not valid:"), seeded.stderr
    assert lines[1].startswith("CHECKOUT_WEBHOOK_DUPLICATE_RATE='2' is not valid:"), seeded.stderr


def test_the_callers_values_are_typed_and_checked_like_the_environments(tmp_path: Any) -> None:
    database = {"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/x.db", "SECRET_KEY": STRONG}
    app = create_app({**database, "CHECKOUT_SLOW_CARD_SECONDS": "4", "CHECKOUT_LAB": "off"})
    assert settings(app).slow_card_seconds == 4.0 and settings(app).lab is False
    with pytest.raises(ValueError, match=r"CHECKOUT_WAITERS_PER_KEY=0 is not valid"):
        create_app({**database, "CHECKOUT_WAITERS_PER_KEY": 0})


@pytest.mark.parametrize("url", ["rabbitmq://shop:Sup3rSecret@broker/", "amqp://shop:Sup3rSecret@broker:99999/"])
def test_a_broker_url_that_is_not_valid_is_refused_without_showing_its_password(tmp_path: Any, url: str) -> None:
    database = {"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/x.db", "SECRET_KEY": STRONG}
    with pytest.raises(ValueError, match=r"CHECKOUT_AMQP_URL='.*shop:\*\*\*@broker.*' is not valid") as refused:
        create_app({**database, "CHECKOUT_AMQP_URL": url})
    assert "Sup3rSecret" not in str(refused.value)


def test_the_settings_read_the_environment_on_their_own(monkeypatch: pytest.MonkeyPatch) -> None:
    from checkout.config import Settings

    monkeypatch.setenv("CHECKOUT_LEASE_SECONDS", "45")
    monkeypatch.setenv("CHECKOUT_TRUSTED_HOSTS", "Shop.example, .shop.example")  # a list by commas, not JSON
    monkeypatch.setenv("CHECKOUT_SHOP_URL", "https://shop.example/")  # the rules hold here too
    settings = Settings()
    assert settings.lease_seconds == 45.0
    assert settings.trusted_hosts == ("shop.example", ".shop.example")
    assert settings.shop_url == "https://shop.example"


def _instance_secret_in(folder: str) -> str:
    from checkout.config import instance_secret

    return instance_secret(folder, "fingerprint_secret")


def test_servers_starting_at_once_all_read_the_one_complete_instance_secret(tmp_path: Any) -> None:
    """Two servers (make proxy) or several workers start at once on a fresh instance folder: every one must
    read the same, whole secret, or a retry that lands on the other server is a fingerprint mismatch (seen
    in a full run; before, a process could read the file its neighbour had created and not yet written)."""
    import multiprocessing

    with multiprocessing.get_context("fork").Pool(8) as pool:
        for trial in range(30):
            folder = tmp_path / f"instance-{trial}"
            folder.mkdir()
            secrets_read = pool.map(_instance_secret_in, [str(folder)] * 8)
            assert len(set(secrets_read)) == 1 and len(secrets_read[0]) == 64, (trial, set(secrets_read))
            assert [p.name for p in folder.iterdir()] == ["fingerprint_secret"]  # no draft left behind


def test_make_proxy_caps_prefer_wait_a_second_below_nginxs_read_timeout() -> None:
    """Behind nginx a duplicate that waits must answer before nginx gives up on it (else the client gets a 504)."""
    assert [wait_cap(timeout) for timeout in ("1s", "1500ms", "2", "60s", "2m", "1m30s", "1h")] == [
        0, 0, 1, 59, 119, 89, 3599
    ]  # fmt: skip
    for wrong in ("soon", "", "1x", "s1"):
        with pytest.raises(ValueError, match="not an nginx time"):
            wait_cap(wrong)


def test_the_cap_on_prefer_wait_is_the_engines_setting(tmp_path: Any) -> None:
    app = create_app({"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/x.db", "CHECKOUT_MAX_WAIT_SECONDS": "0"})
    assert app.config["IDEMPOTENCY_MAX_WAIT_SECONDS"] == 0
