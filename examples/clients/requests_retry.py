"""POST /api/orders with requests and urllib3's Retry, set up so that every attempt ends on a final answer.

    python examples/clients/requests_retry.py http://127.0.0.1:5000 "4000 0000 0000 0077"

What the setup says, line by line, is in docs/api.md ("Set up your client").
"""

import json
import sys
import uuid

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry


class UntilFinal(Retry):
    """A 409 is retried only when it says when to come back (in progress); a final 409 has no Retry-After."""

    RETRY_AFTER_STATUS_CODES = frozenset({409, 429, 503})


retry = UntilFinal(
    total=8,  # attempts after the first
    allowed_methods=None,  # every method, POST too: the key makes a retried POST safe
    status_forcelist=(502, 503, 504),  # the proxy's or the gateway's "not yet"; a 409 only with Retry-After
    backoff_factor=1,  # 0 s, 2 s, 4 s ... between attempts (urllib3 2), at most backoff_max
    respect_retry_after_header=True,  # never sooner than the shop asks
    raise_on_status=False,  # after the last attempt, the last answer (not an exception)
)
session = requests.Session()
session.mount("http://", HTTPAdapter(max_retries=retry))
session.mount("https://", HTTPAdapter(max_retries=retry))

url, card = sys.argv[1], sys.argv[2]
body = {"items": [{"sku": "MUG-01", "quantity": 1}], "email": "alice@example.com", "card_number": card}
headers = {"Authorization": "Bearer demo-alice-token", "Idempotency-Key": str(uuid.uuid4())}  # one key, every try
answer = session.post(f"{url}/api/orders", json=body, headers=headers, timeout=(5, 35))  # a POST may take 25 s
print(json.dumps({"status": answer.status_code, "body": answer.json()}))
