"""Every response carries the security headers, on every route the app has; pages with form data
are never stored by a cache."""

from __future__ import annotations

import re

import pytest
from flask import Flask
from flask.testing import FlaskClient

from tests.helpers import ALICE, add_to_cart

SAMPLE_ARGUMENTS = {"order_id": "ord_0000", "sku": "MUG-01", "key": "x" * 20, "refund_id": "re_0000", "name": "no-key"}


def every_route(app: Flask) -> list[tuple[str, str]]:
    """(method, path) for every rule of the app, its arguments filled with sample values."""
    routes = []
    for rule in app.url_map.iter_rules():
        path = rule.rule
        for argument in rule.arguments:
            path = re.sub(rf"<(?:[^:<>]+:)?{argument}>", SAMPLE_ARGUMENTS.get(argument, "x"), path)
        for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}):
            routes.append((method, path))
    return sorted(set(routes))


def assert_security_headers(response, where: str) -> None:
    headers = response.headers
    assert headers.get("X-Content-Type-Options") == "nosniff", where
    policy = headers.get("Content-Security-Policy", "")
    assert "default-src 'self'" in policy, where
    assert "frame-ancestors 'none'" in policy, where
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy, where
    assert headers.get("Referrer-Policy"), where
    if response.mimetype == "text/html" and b"<form" in response.get_data():
        assert "no-store" in headers.get("Cache-Control", ""), where


def test_every_route_answers_with_the_security_headers(app: Flask, client: FlaskClient) -> None:
    add_to_cart(client)
    routes = every_route(app)
    assert len(routes) >= 15
    for method, path in routes:
        with client.open(path, method=method, headers=ALICE) as response:
            assert_security_headers(response, f"{method} {path} -> {response.status_code}")


@pytest.mark.parametrize("path", ["/checkout", "/cart", "/", "/lab/unsafe-checkout"])
def test_pages_with_forms_are_never_stored(client: FlaskClient, path: str) -> None:
    add_to_cart(client)
    response = client.get(path)
    assert response.status_code == 200
    assert "no-store" in response.headers["Cache-Control"]


def test_errors_and_static_files_carry_the_headers_too(client: FlaskClient) -> None:
    for path, method in (("/no-such-page", "GET"), ("/static/style.css", "GET"), ("/checkout", "DELETE")):
        with client.open(path, method=method) as response:
            assert_security_headers(response, f"{method} {path}")
