"""make proxy's shop for the tests: two named gunicorn servers (tests/servers.py) on one database,
and a real nginx in front of them with deploy/nginx/checkout.conf.template (checkout/lab/proxy.py)."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from checkout.lab.proxy import READ_TIMEOUT, SERVER_NAMES, Proxied, Proxy, find_nginx, nginx, wait_cap
from tests.helpers import wait_for
from tests.servers import Server, free_port, gunicorn

NEEDS_NGINX = pytest.mark.skipif(
    find_nginx() is None,
    reason="nginx is not installed (looked in PATH, /usr/sbin, /usr/local/sbin): these tests run a real one. "
    "Debian or Ubuntu: apt-get install nginx (.ci/run installs it when it runs as root)",
)
SLOW = {"CHECKOUT_SLOW_CARD_SECONDS": "3"}  # the slow card's default: longer than two of nginx's 1 s waits


@dataclass
class ProxiedShop:
    url: str  # nginx's address: the shop's own (CHECKOUT_SHOP_URL)
    servers: list[Server]
    proxy: Proxy

    def name_of(self, upstream: str) -> str:
        """app-1 or app-2: the server at nginx's upstream address."""
        [index] = [i for i, server in enumerate(self.servers) if server.url == f"http://{upstream}"]
        return SERVER_NAMES[index]

    def sent(self, request: str) -> Proxied:
        """The one request nginx finished that starts with ``request`` (waits until it has)."""
        [line] = wait_for(lambda: self.proxy.requests(request))
        return line


@contextlib.contextmanager
def proxied_shop(
    database_url: str, folder: Path, *, read_timeout: str = READ_TIMEOUT, settings: dict[str, str] | None = None
) -> Iterator[ProxiedShop]:
    """make proxy's shop: app-1 and app-2 on one database, nginx in front of them, until the block ends (``Prefer:
    wait`` capped below nginx's read timeout, as make proxy does, unless ``settings`` say otherwise)."""
    port = free_port()
    shop_url = f"http://127.0.0.1:{port}"
    with gunicorn(
        database_url,
        folder,
        servers=2,
        workers=2,
        names=SERVER_NAMES,
        settings={
            **SLOW,
            "CHECKOUT_MAX_WAIT_SECONDS": str(wait_cap(read_timeout)),
            "CHECKOUT_SHOP_URL": shop_url,
            **(settings or {}),
        },
    ) as servers:
        upstreams = [server.url.removeprefix("http://") for server in servers]
        with nginx(
            folder / "nginx",
            listen=f"127.0.0.1:{port}",
            app_servers=upstreams,
            read_timeout=read_timeout,
            output=subprocess.DEVNULL,
        ) as proxy:
            yield ProxiedShop(shop_url, servers, proxy)
