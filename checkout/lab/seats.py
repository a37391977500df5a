"""Seats: one shop for a room of students, each a customer of their own with their own lab.

A teacher runs ``flask --app checkout workshop seats 20``; it prints a join link and an API token per seat. A
student opens the link: their browser becomes the seat's customer. From then on the lab shows only the seat's
records, orders, charges, audit trail, damage and mail, its purge purges only the seat's keys, its API token
pays as the seat (curl, the retry client, the mass test), and exercise 10's Last-One Lamp is the seat's own: a
copy reserved for its customer (``Product.reserved_for_id``), which two windows of the seat race for.
``/lab/room`` is the teacher's view of every seat. A browser that never joined a seat sees the whole shop, as
with ``make run``.

A seat's token and join code are HMACs of the app's SECRET_KEY: the command prints the same ones every time, the
join page can show a student their token again, and the database keeps only the token's hash, as for every customer.
Design: docs/workshop.md#a-classroom-on-one-server
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

import click
import sqlalchemy as sa
from flask import Blueprint, Flask, abort, current_app, flash, redirect, render_template, session, url_for
from flask.cli import AppGroup
from flask.typing import ResponseReturnValue
from flask_babel import gettext as _

from checkout.config import settings
from checkout.database import insert_ignoring_conflicts, utcnow, writing
from checkout.extensions import db
from checkout.lab import damage, lab_only
from checkout.shop import orders
from checkout.shop.forms import EmptyForm
from checkout.shop.identity import SESSION_CUSTOMER, hash_token
from checkout.shop.models import PENDING, Customer, Order, OrderItem, Product
from checkout.shop.seed import PRODUCTS

bp = lab_only(Blueprint("seats", __name__))

PUBLIC_PREFIX = "cus_seat_"
MOST = 99  # two digits: seat-01 .. seat-99
LAMP = next(product for product in PRODUCTS if product[0] == "LAST-01")  # the one of a kind exercise 10 races for
ONE_OF_A_KIND = 1


@dataclass(frozen=True)
class Seat:
    number: int

    @property
    def name(self) -> str:
        return f"seat-{self.number:02d}"

    @property
    def public_id(self) -> str:
        return f"{PUBLIC_PREFIX}{self.number:02d}"

    @property
    def token(self) -> str:
        """The seat's API token (``Authorization: Bearer ...``)."""
        return f"{self.name}-{_derived('token', self.name)[:24]}"

    @property
    def lamp_sku(self) -> str:
        """The seat's own Last-One Lamp."""
        return f"LAST-S{self.number:02d}"

    @property
    def code(self) -> str:
        """The secret part of the join link: only the teacher's list has it."""
        return _derived("join", self.name)[:16]

    def join_path(self) -> str:
        return url_for("seats.join", number=self.number, code=self.code)


def _derived(purpose: str, name: str) -> str:
    secret = str(current_app.config["SECRET_KEY"]).encode()
    return hmac.new(secret, f"checkout seat {purpose}:{name}".encode(), hashlib.sha256).hexdigest()


def make_seats(count: int) -> list[Seat]:
    """Seats 1 to ``count``, each a customer with its token (running it again adds only the missing ones)."""
    seats = [Seat(number) for number in range(1, count + 1)]
    with writing():
        for seat in seats:
            db.session.execute(
                insert_ignoring_conflicts(Customer, db.session).values(
                    public_id=seat.public_id, name=seat.name, token_hash=hash_token(seat.token), created_at=utcnow()
                )
            )  # and the token printed now is the one that works, should SECRET_KEY have changed since
            mine = Customer.public_id == seat.public_id
            db.session.execute(sa.update(Customer).where(mine).values(token_hash=hash_token(seat.token)))
            _give_a_lamp(seat, db.session.scalar(sa.select(Customer.id).where(mine)))
    return seats


def _give_a_lamp(seat: Seat, customer_id: int | None) -> None:
    """The seat's own copy of the Last-One Lamp, stock 1, told to the lab's stock accounts like every shelf."""
    _sku, name, description, emoji, price, _stock = LAMP
    stock = ONE_OF_A_KIND
    made = db.session.execute(
        insert_ignoring_conflicts(Product, db.session)
        .values(sku=seat.lamp_sku, name=name, description=description, emoji=emoji, price_cents=price,
                currency="USD", stock=stock, reserved_for_id=customer_id)
        .returning(Product.id)
    ).all()  # fmt: skip
    if made:
        orders.tell(orders.stocked, sku=seat.lamp_sku, added=stock)


def seats_made() -> list[Seat]:
    numbers = db.session.scalars(
        sa.select(Customer.public_id)
        .where(Customer.public_id.startswith(PUBLIC_PREFIX, autoescape=True))
        .order_by(Customer.public_id)
    ).all()
    return [Seat(int(public_id.removeprefix(PUBLIC_PREFIX))) for public_id in numbers]


def seat_of_this_browser() -> Seat | None:
    """The seat this browser joined, if it joined one."""
    customer = session.get(SESSION_CUSTOMER)
    if isinstance(customer, str) and customer.startswith(PUBLIC_PREFIX):
        return Seat(int(customer.removeprefix(PUBLIC_PREFIX)))
    return None


def scope() -> str | None:
    """Whose rows the lab shows this browser: its seat's customer, or everyone's (None) in a browser of no seat."""
    seat = seat_of_this_browser()
    return seat.public_id if seat is not None else None


@bp.get("/lab/join/<int:number>/<code>")
def join(number: int, code: str) -> ResponseReturnValue:
    """The link a student opens: this browser becomes the seat (a new session: no cart of anyone else's)."""
    seat = Seat(number)
    known = db.session.scalar(sa.select(Customer.id).where(Customer.public_id == seat.public_id))
    if known is None or not hmac.compare_digest(code.encode(), seat.code.encode()):
        abort(404)
    session.clear()
    session[SESSION_CUSTOMER] = seat.public_id
    return redirect(url_for("seats.mine"), 303)


@bp.get("/lab/seat")
def mine() -> ResponseReturnValue:
    """This browser's seat: its name, its API token for curl and the clients, its join link and its lamp."""
    seat = seat_of_this_browser()
    lamp = None if seat is None else db.session.scalar(sa.select(Product.stock).where(Product.sku == seat.lamp_sku))
    restockable = seat is not None and db.session.scalar(sa.select(_restockable(seat)))
    return render_template("lab/seat.html", seat=seat, lamp=lamp, restockable=restockable, form=EmptyForm())


def _restockable(seat: Seat) -> sa.ColumnElement[bool]:
    """The seat's lamp is sold and settled: none on the shelf, and no order still paying for it (one that then
    failed would put its lamp back beside the new one: two of a kind)."""
    shelf_empty = sa.exists().where(Product.sku == seat.lamp_sku, Product.stock == 0)
    paying = sa.exists().where(OrderItem.sku == seat.lamp_sku, OrderItem.order_id == Order.id, Order.status == PENDING)
    return sa.and_(shelf_empty, ~paying)


@bp.post("/lab/seat/lamp")
def new_lamp() -> ResponseReturnValue:
    """Exercise 10 again: a new lamp on the seat's empty shelf (the sold one stays sold, its order paid)."""
    seat = seat_of_this_browser()
    if seat is None or not EmptyForm().validate():
        abort(400)
    with writing():
        put = sa.update(Product).where(Product.sku == seat.lamp_sku, _restockable(seat)).values(stock=ONE_OF_A_KIND)
        if db.session.execute(put.returning(Product.id)).first() is not None:
            orders.tell(orders.stocked, sku=seat.lamp_sku, added=ONE_OF_A_KIND)
            flash(_("A new lamp is on your shelf."), "success")
    return redirect(url_for("seats.mine"), 303)


@bp.get("/lab/room")
def room() -> ResponseReturnValue:
    """The teacher's view: every seat, with its purchases, what it was charged and its damage."""
    by_customer = damage.by_customer()
    seats = [(seat, by_customer.get(seat.name)) for seat in seats_made()]
    return render_template("lab/room.html", seats=seats, this_seat=seat_of_this_browser())


def register_commands(app: Flask) -> None:
    workshop = AppGroup("workshop", help="A workshop on one server: seats for the students.")

    @workshop.command("seats")
    @click.argument("count", type=click.IntRange(1, MOST))
    def seats_command(count: int) -> None:
        """Make COUNT seats and print each one's join link and API token (the same ones while SECRET_KEY is)."""
        base = settings().shop_url
        for seat in make_seats(count):
            with current_app.test_request_context():
                link = base + seat.join_path()
            click.echo(f"{seat.name}  {link}  token: {seat.token}")

    app.cli.add_command(workshop)
