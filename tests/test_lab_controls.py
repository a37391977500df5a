"""The lab's kill-worker control says what it does: a whole worker dies, with every request it serves.

SIGKILL cannot pick one thread of a gthread worker, and an exception raised into the holder's thread
would run the cleanup a crash never runs; so the honest control is the truthful one."""

from __future__ import annotations

import threading

from tests.conftest import LiveServer
from tests.helpers import browser_at_checkout, wait_for


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
