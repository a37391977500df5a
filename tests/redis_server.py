"""The Redis the tests use: a database index of their own, flushed before and after each test.

``TEST_REDIS_URL`` (default ``redis://127.0.0.1:6379/12``) names it. Tests
flush it (FLUSHDB), so it must never be database 0: the URL is refused if it
is. Run in parallel (pytest-xdist), worker N uses the index after it by N, so
no worker flushes another's keys. Without an answering Redis the tests that
need one are skipped, saying so.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis

DEFAULT_URL = "redis://127.0.0.1:6379/12"


def redis_url_for_tests() -> str:
    url = os.environ.get("TEST_REDIS_URL", DEFAULT_URL)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")  # gw0, gw1, ... (gw0 without xdist)
    offset = int(worker.removeprefix("gw") or 0)
    if offset == 0:
        return url
    parts = urlsplit(url)
    index = int(parts.path.strip("/") or 0) + offset
    if index > 15:
        pytest.fail(f"pytest-xdist worker {worker} would use Redis database {index}: give TEST_REDIS_URL a lower one")
    return urlunsplit(parts._replace(path=f"/{index}"))


def client_for(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, decode_responses=True, socket_connect_timeout=1, socket_timeout=5)


@contextmanager
def own_redis_database() -> Iterator[str]:
    """The tests' Redis database, empty; skips the test if no Redis answers."""
    url = redis_url_for_tests()
    client = client_for(url)
    index = int(client.connection_pool.connection_kwargs.get("db", 0))
    if index == 0:
        pytest.fail(f"TEST_REDIS_URL={url} is database 0: tests flush their database, give them one of their own")
    try:
        client.ping()
    except redis.RedisError as error:
        client.close()
        pytest.skip(f"needs Redis at TEST_REDIS_URL/127.0.0.1:6379: {url} does not answer ({error})")
    client.flushdb()
    try:
        yield url
    finally:
        client.flushdb()
        client.close()


def flush(url: str) -> None:
    """Redis loses every key of the tests' database (FLUSHDB of that index only)."""
    client = client_for(url)
    try:
        client.flushdb()
    finally:
        client.close()
