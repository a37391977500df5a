"""CHECKOUT_SERVER_NAME: behind a proxy, the lab names the app server beside each worker's host:pid."""

from __future__ import annotations

from typing import Any

import pytest
from flask.testing import FlaskClient

from checkout.idempotency.store import worker_name
from checkout.lab.servers import LabWorker
from tests.helpers import ALICE, Ledger, order_body, table_counts


@pytest.fixture
def app_overrides() -> dict[str, Any]:
    return {"CHECKOUT_SERVER_NAME": "app-1"}


def test_a_named_servers_steps_carry_its_name_in_the_lab_timeline(client: FlaskClient, ledger: Ledger) -> None:
    client.post("/api/orders", json=order_body(), headers={**ALICE, "Idempotency-Key": "n" * 20})
    page = client.get(f"/lab?key={'n' * 20}").get_data(as_text=True)
    assert [(row.worker, row.server) for row in ledger.rows(LabWorker)] == [(worker_name(), "app-1")]
    assert page.count('data-testid="timeline-server">app-1<') == len(ledger.events())  # every step, named
    events = client.get("/api/lab/ledger").get_json()["events"]
    assert {(e["worker"], e["server"]) for e in events} == {(worker_name(), "app-1")}


@pytest.mark.parametrize("app_overrides", [{}])
def test_an_unnamed_server_writes_nothing_and_the_lab_shows_host_and_pid(
    client: FlaskClient, ledger: Ledger, app_overrides: dict[str, Any]
) -> None:
    before = table_counts(client.application)
    client.get("/")
    assert table_counts(client.application) == before
    client.post("/api/orders", json=order_body(), headers={**ALICE, "Idempotency-Key": "u" * 20})
    page = client.get(f"/lab?key={'u' * 20}").get_data(as_text=True)
    assert ledger.rows(LabWorker) == []
    assert 'data-testid="timeline-server"' not in page
    assert f">{worker_name()}</span>" in page
