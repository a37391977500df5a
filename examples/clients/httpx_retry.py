"""POST /api/orders with httpx, retried by hand (httpx retries connections, not answers) until a final answer.

    python examples/clients/httpx_retry.py http://127.0.0.1:5000 "4000 0000 0000 0077"

What the setup says, line by line, is in docs/api.md ("Set up your client").
"""

import json
import random
import sys
import time
import uuid

import httpx

NOT_YET = {502, 503, 504}  # the proxy's or the gateway's "not yet"; a 409 or 429 only with Retry-After

url, card = sys.argv[1], sys.argv[2]
body = {"items": [{"sku": "MUG-01", "quantity": 1}], "email": "alice@example.com", "card_number": card}
headers = {"Authorization": "Bearer demo-alice-token", "Idempotency-Key": str(uuid.uuid4())}  # one key, every try
answer = None
with httpx.Client(timeout=httpx.Timeout(35.0, connect=5.0)) as client:  # a POST may take 25 s; httpx waits 5
    for attempt in range(9):
        try:
            answer = client.post(f"{url}/api/orders", json=body, headers=headers)
        except httpx.TransportError:  # no answer: the same key again finds what the first attempt did
            answer = None
            time.sleep(random.uniform(0, min(8, 0.5 * 2**attempt)))
            continue
        asked = answer.headers.get("Retry-After", "")
        in_progress = answer.status_code in (409, 429) and asked  # a final 409 (order-already-paid) has none
        if not (answer.status_code in NOT_YET or in_progress) or attempt == 8:
            break
        time.sleep(max(float(asked) if asked.isdigit() else 0, random.uniform(0, min(8, 0.5 * 2**attempt))))
print(json.dumps({"status": answer.status_code, "body": answer.json()} if answer else {"status": None}))
