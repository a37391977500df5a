"""The shop's forms. All carry a CSRF token (Flask-WTF)."""

from __future__ import annotations

from flask_wtf import FlaskForm
from wtforms import EmailField, HiddenField, IntegerField, StringField, SubmitField
from wtforms.validators import DataRequired, Email, Length, NumberRange, ValidationError

from checkout.gateway.cards import digits_only, luhn_valid
from checkout.shop.cart import MAX_QUANTITY


def card_number_check(_form: FlaskForm, field: StringField) -> None:
    raw = field.data or ""
    if any(not (ch.isdigit() or ch in " -") for ch in raw) or not luhn_valid(digits_only(raw)):
        raise ValidationError("Enter a valid card number (try 4242 4242 4242 4242).")


class AddToCartForm(FlaskForm):
    sku = HiddenField(validators=[DataRequired()])
    quantity = IntegerField("Quantity", default=1, validators=[NumberRange(1, MAX_QUANTITY)])
    submit = SubmitField("Add to cart")


class EmptyForm(FlaskForm):
    """Just the CSRF token, for buttons that change state."""


class PaymentForm(FlaskForm):
    """What a shopper types to pay. The lab's unsafe checkout uses just this."""

    email = EmailField(
        "Email", validators=[DataRequired("Enter your email."), Email("Enter a valid email."), Length(max=254)]
    )
    card_number = StringField(
        "Card number", validators=[DataRequired("Enter a card number."), Length(max=40), card_number_check]
    )


class CheckoutForm(PaymentForm):
    """The safe checkout: the payment fields plus the two hidden fields that make a retry a retry."""

    # The client half of the pattern: one key per payment attempt, sent with every retry of it.
    idempotency_key = HiddenField()
    # Which cart this form was rendered for, so a stale form is recognised.
    cart_version = HiddenField()
