"""Payments taken once per Idempotency-Key: the engine used as your own app would use it (docs/engine.md)."""

import os
import time
from contextlib import suppress

import sqlalchemy as sa
from flask import Flask, request
from flask_sqlalchemy import SQLAlchemy
from sqlalchemy import Column, Integer, String, Table
from sqlalchemy.exc import IntegrityError

from checkout.idempotency import STARTED, Complete, Idempotency, MoveTo, Phase, Pipeline, StoredResponse, writing

db, once = SQLAlchemy(), Idempotency()
payments = Table("payments", db.metadata, Column("id", Integer, primary_key=True), Column("amount", Integer))
charges = Table("charges", db.metadata, Column("key", String(64), primary_key=True), Column("payment", Integer))


def create(op, _):  # in the claim's transaction: the payment and the key commit together, or neither does
    made = db.session.execute(sa.insert(payments).values(amount=request.get_json()["amount"]))
    op.reference = str(made.inserted_primary_key[0])
    return MoveTo("created")


def charge(op):  # the fake provider, no transaction open (it may be slow), called with a key from the payment
    time.sleep(float(os.environ.get("EXAMPLE_PROVIDER_SECONDS", "0")))
    with suppress(IntegrityError), writing():  # its ledger charges a key once, as real providers do
        db.session.execute(sa.insert(charges).values(key=f"payment-{op.reference}", payment=int(op.reference)))
    if os.environ.get("EXAMPLE_CRASH_AFTER_CHARGE") == "1" and not op.resumed:
        raise RuntimeError("crashed after the provider charged")  # the retry resumes here, at "created"


def paid(op, _):  # the answer: stored with the key, and replayed byte for byte
    return Complete(StoredResponse.json(201, {"id": int(op.reference), "amount": request.get_json()["amount"]}))


PAYMENTS, PHASES = Pipeline("POST /payments"), {STARTED: Phase(create), "created": Phase(paid, call=charge)}
app = Flask(__name__)
app.config["SQLALCHEMY_DATABASE_URI"] = os.environ.get("EXAMPLE_DATABASE_URL", "sqlite:///example.db")  # instance/
app.config["SECRET_KEY"] = os.environ.get("EXAMPLE_SECRET_KEY", "example")  # keys the fingerprints: set your own
db.init_app(app)
once.init_app(app, db)  # its record table joins db.metadata
once.create_all(app)  # at start, safely when several workers start at once


@app.post("/payments")
def pay():  # the Idempotency-Key header is read by respond: a 400 unless there is one valid key
    body = request.get_json(silent=True)
    if not isinstance(body, dict) or type(body.get("amount")) is not int or body["amount"] < 1:
        return {"title": "Invalid payment", "detail": 'Send {"amount": <a positive integer>}.'}, 422
    return once.respond(PAYMENTS, PHASES, body={"amount": body["amount"]})


@app.get("/payments")
def list_payments():
    count = sa.select(sa.func.count()).where(charges.c.payment == payments.c.id).scalar_subquery()
    rows = db.session.execute(sa.select(payments.c.id, payments.c.amount, count).order_by(payments.c.id))
    return [{"id": id_, "amount": amount, "charges": charged} for id_, amount, charged in rows]
