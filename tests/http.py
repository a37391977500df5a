"""A tiny HTTP client for tests against a live server (stdlib only, no retries)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_opener = urllib.request.build_opener(_NoRedirect)


def send(
    method: str, url: str, *, body: bytes | None = None, headers: dict[str, str] | None = None, timeout: float = 30
) -> Reply:
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with _opener.open(request, timeout=timeout) as response:
            return Reply(response.status, dict(response.headers), response.read())
    except urllib.error.HTTPError as error:
        with error:
            return Reply(error.code, dict(error.headers), error.read())


def post_json(url: str, payload: Any, headers: dict[str, str]) -> Reply:
    return send("POST", url, body=json.dumps(payload).encode(), headers={"Content-Type": "application/json", **headers})


def raw_request(url: str, request: bytes, timeout: float = 30) -> tuple[int, dict[str, str], bytes]:
    """Send these exact bytes to the server at ``url`` and read one answer (for requests no client library sends)."""
    import http.client
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), timeout=timeout) as sock:
        sock.sendall(request)
        answer = http.client.HTTPResponse(sock, method=request.split(b" ", 1)[0].decode())
        answer.begin()
        return answer.status, dict(answer.getheaders()), answer.read()
