"""The shop's forms. All carry a CSRF token (Flask-WTF); their fields are checked by the shop's parsers
(checkout.shop.schemas): the email and the card by the very parsers the API runs, a SKU by the API's pattern."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flask_babel import lazy_gettext as _l
from flask_wtf import FlaskForm
from wtforms import EmailField, Field, HiddenField, StringField, SubmitField
from wtforms.validators import DataRequired, ValidationError

from checkout.shop import schemas


def parsed_by(parse: Callable[[object], Any], message: Any) -> Callable[[Any, Field], None]:
    """A WTForms validator that runs one of the shop's parsers, with the form's own (translated) message."""

    def check(_form: Any, field: Field) -> None:
        try:
            parse(field.data)
        except schemas.Invalid:
            raise ValidationError(str(message)) from None  # a lazy translation, in this request's language

    return check


class AddToCartForm(FlaskForm):  # type: ignore[misc]  # Flask-WTF ships no type information
    sku = HiddenField(validators=[DataRequired(), parsed_by(schemas.clean_sku, _l("That is not a product."))])
    quantity = StringField(
        _l("Quantity"),
        default="1",
        validators=[parsed_by(schemas.clean_quantity, _l("Choose a quantity from 1 to 99."))],
    )
    submit = SubmitField(_l("Add to cart"))


class EmptyForm(FlaskForm):  # type: ignore[misc]  # as above: FlaskForm is Any to mypy
    """Just the CSRF token, for buttons that change state."""


class PaymentForm(FlaskForm):  # type: ignore[misc]  # as above: FlaskForm is Any to mypy
    """What a shopper types to pay (a form without the key and the cart version may reuse just this)."""

    email = EmailField(
        _l("Email"),
        validators=[DataRequired(_l("Enter your email.")), parsed_by(schemas.clean_email, _l("Enter a valid email."))],
    )
    card_number = StringField(
        _l("Card number"),
        validators=[
            DataRequired(_l("Enter a card number.")),
            parsed_by(schemas.clean_card_number, _l("Enter a valid card number (try 4242 4242 4242 4242).")),
        ],
    )

    def normalized_email(self) -> str:
        return schemas.clean_email(self.email.data)

    def card_digits(self) -> str:
        return schemas.clean_card_number(self.card_number.data)


class CheckoutForm(PaymentForm):
    """The safe checkout: the payment fields plus the hidden fields that make a retry a retry."""

    # The client half of the pattern: one key per payment, sent with every retry of it.
    idempotency_key = HiddenField()
    # Which cart version this form was rendered for, and the total it showed: a stale form is recognised.
    cart_version = HiddenField()
    expected_total = HiddenField()


class RefundForm(FlaskForm):  # type: ignore[misc]  # as above: FlaskForm is Any to mypy
    """Give money back for an order: the amount (empty: everything left), and the refund's own key."""

    amount = StringField(
        _l("Amount to refund ($)"),
        validators=[parsed_by(schemas.clean_dollars, _l("Enter an amount like 14.00, or leave it empty."))],
    )
    # One key per refund form: a double submit of this form refunds once.
    idempotency_key = HiddenField()
