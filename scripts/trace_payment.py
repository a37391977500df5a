"""Which files of checkout/ one API payment crosses, in the order it enters them.

    .venv/bin/python scripts/trace_payment.py [--all] [--lab]

Builds a throw-away app on SQLite (the shop alone: ``--lab`` turns the lab on, whose listener
notes each order), seeds it, and sends one ``POST /api/orders``
(a fresh key, the success card) through the test client with ``sys.setprofile``
on. Prints each file of ``checkout/`` the payment's calls enter (first entry
order), how many there are, how many functions ran, and how often the story
came back to a module it had already left (``--all`` lists every entry).
"""

from __future__ import annotations

import sys
import tempfile
import uuid
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = str(ROOT / "checkout") + "/"
sys.path.insert(0, str(ROOT))


def main() -> None:
    from checkout import create_app
    from checkout.database import writing
    from checkout.extensions import db
    from checkout.shop.seed import seed

    folder = tempfile.mkdtemp(prefix="checkout-trace-")
    app = create_app(
        {
            "SQLALCHEMY_DATABASE_URI": f"sqlite:///{folder}/trace.sqlite3",
            "SECRET_KEY": "trace",
            "CHECKOUT_FINGERPRINT_SECRET": "trace",
            "CHECKOUT_LAB": "--lab" in sys.argv,
        },
        instance_path=folder,
    )
    with app.app_context():
        db.create_all()
        with writing():
            seed(demo_customers=True)
        db.session.remove()
    client = app.test_client()
    body = {
        "email": "trace@example.com",
        "card_number": "4242 4242 4242 4242",
        "items": [{"sku": "MUG-01", "quantity": 1}],
    }
    headers = {"Authorization": "Bearer demo-alice-token"}
    client.post("/api/orders", json=body, headers={**headers, "Idempotency-Key": str(uuid.uuid4())})  # warm up

    entries: list[tuple[str, str]] = []

    def profile(frame: FrameType, event: str, _arg: Any) -> None:
        if event == "call" and frame.f_code.co_filename.startswith(PACKAGE):
            entries.append((frame.f_code.co_filename[len(str(ROOT)) + 1 :], frame.f_code.co_qualname))

    sys.setprofile(profile)
    try:
        answer = client.post("/api/orders", json=body, headers={**headers, "Idempotency-Key": str(uuid.uuid4())})
    finally:
        sys.setprofile(None)
    assert answer.status_code == 201, answer.get_data(as_text=True)

    files: list[str] = []
    returns, last, left = 0, None, set()
    for file, _function in entries:
        if file != last:
            if file in left:
                returns += 1
            if last is not None:
                left.add(last)
            last = file
        if file not in files:
            files.append(file)
    if "--all" in sys.argv:
        for file, function in entries:
            print(f"  {file}: {function}")
    for file in files:
        print(file)
    functions = len(set(entries))
    print(f"{len(files)} files of checkout/, {functions} functions, {returns} returns to a module already left")


if __name__ == "__main__":
    main()
