"""no-stored-result: the key is stored but not the response.

THE MISTAKE: the store remembers that a key was used, not what was answered.
A retry is turned away with a generic "already processed", so a client whose
first answer was lost never learns its order: not its id, not even whether
the card was declined. It gets a 200 where the first answer was a 201, with
no order in it; many clients then try again with a new key, and pay twice.

THE FIX in the safe code: checkout/idempotency/engine.py (_answer_existing)
replays the stored status, headers and byte-identical body, which
checkout/shop/responders.py (ApiResponder) built once and the engine stored in
the transaction that finished the order; checkout/shop/api.py (answer) adds
Idempotent-Replayed: true.
"""

from __future__ import annotations

from flask import Response, jsonify

from checkout.lab.mistakes.plumbing import Attempt, claim_key, mismatch, pay, same_request, send

TAKES_KEY = True


def handle(attempt: Attempt) -> Response:
    used, mine = claim_key(attempt, fingerprint=attempt.fingerprint)
    if not mine:
        if not same_request(used, attempt):
            return mismatch()
        # THE MISTAKE: the key says "done", and nothing more: there is no answer to give back.
        return jsonify(status="already_processed", detail="This request was already processed.")
    return send(pay(attempt))  # the answer goes to the client, and nowhere else
