"""The lab's requests to this shop: over HTTP to ``CHECKOUT_SHOP_URL``, as a client would send them, never to the
address a request names (its Host header is the sender's to forge)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from flask import Flask

from checkout.gateway.relay import shop_url

SEND_TIMEOUT_SECONDS = 30.0  # longer than the very slow card

Answer = tuple[int, dict[str, str], bytes]  # status (0: no answer), headers, body


def send(app: Flask, method: str, path: str, *, headers: dict[str, str], body: bytes | None = None) -> Answer:
    request = urllib.request.Request(shop_url(app) + path, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=SEND_TIMEOUT_SECONDS) as answer:
            return answer.status, dict(answer.headers), answer.read()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, dict(error.headers), error.read()
    except OSError as error:
        return 0, {}, json.dumps({"title": f"No answer: {error}"}).encode()
