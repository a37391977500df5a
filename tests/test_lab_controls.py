"""The lab's kill-worker control says what it does: a whole worker dies, with every request it serves.

SIGKILL cannot pick one thread of a gthread worker, and an exception raised into the holder's thread
would run the cleanup a crash never runs; so the honest control is the truthful one."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import uuid

import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient

from checkout.audit import IdempotencyRecord
from checkout.extensions import db
from tests.conftest import LiveServer
from tests.helpers import browser_at_checkout, claim_as_a_dying_worker, wait_for


def test_the_kill_worker_control_warns_that_every_request_of_that_worker_dies(live_server: LiveServer) -> None:
    browser, form = browser_at_checkout(live_server.url)  # the slow card: the lease is held for a while
    paying = threading.Thread(target=lambda: browser.open(f"{live_server.url}/checkout", data=form).read())
    paying.start()
    try:
        live_server.wait_for_posts("/checkout", 1)

        def lab_with_the_kill_control() -> str:
            html = browser.open(f"{live_server.url}/lab/live").read().decode()
            return html if 'data-testid="kill-worker"' in html else ""

        page = wait_for(lab_with_the_kill_control)
        assert 'data-testid="kill-bystanders"' in page
        assert "every request it is serving at that moment dies with it" in page
    finally:
        paying.join(timeout=20)


def test_a_holder_that_died_gets_no_kill_button_but_says_its_lease_still_runs(app: Flask, client: FlaskClient) -> None:
    """Exercise 5 after the kill: the dead worker's lease runs on, and the lab no longer offers to kill it."""
    key = str(uuid.uuid4())
    claim_as_a_dying_worker(app, key, lease_seconds=60)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a worker on this machine that has died
    with app.app_context():
        db.session.execute(sa.update(IdempotencyRecord).values(worker=f"{socket.gethostname()}:{gone.pid}"))
        db.session.commit()
    html = client.get("/lab/live", query_string={"key": key}).get_data(as_text=True)
    assert 'data-testid="kill-worker"' not in html
    assert 'data-testid="holder-dead"' in html and f"Worker {gone.pid} is dead" in html
    with app.app_context():  # and a live holder still gets the button
        db.session.execute(sa.update(IdempotencyRecord).values(worker=f"{socket.gethostname()}:{os.getpid()}"))
        db.session.commit()
    html = client.get("/lab/live", query_string={"key": key}).get_data(as_text=True)
    assert 'data-testid="kill-worker"' in html and 'data-testid="holder-dead"' not in html
