"""Card numbers and the mock gateway's test cards: validation, masking, and what each test card does.

The shop's schemas validate card numbers with these; the gateway gives each test card its behaviour; the checkout
page and the lab list the test cards.
"""

from __future__ import annotations

import enum

ASCII_DIGITS = frozenset("0123456789")


def digits_only(card_number: str) -> str:
    """The ASCII digits of a card number. (str.isdigit() also says yes to "４", "⁴" and "④".)"""
    return "".join(ch for ch in card_number if ch in ASCII_DIGITS)


def luhn_valid(digits: str) -> bool:
    if not 12 <= len(digits) <= 19 or not set(digits) <= ASCII_DIGITS:
        return False
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char)
        if index % 2 == 1:
            value *= 2
            if value > 9:
                value -= 9
        total += value
    return total % 10 == 0


def last4(card_number: str) -> str:
    return digits_only(card_number)[-4:]


class Behaviour(enum.Enum):
    SUCCEEDS = "succeeds"
    DECLINED = "declined"
    UNAVAILABLE_ONCE = "unavailable once"  # first call for a gateway key fails before charging
    ANSWER_LOST_ONCE = "answer lost once"  # first call charges, then the answer is lost
    SLOW = "slow"
    VERY_SLOW = "very slow"  # long enough to kill the worker by hand (exercise 5)


def N_(text: str) -> str:  # noqa: N802 (gettext's conventional name for a no-op marker)
    """Marks a description for translation (extracted by pybabel); whoever shows it translates it."""
    return text


TEST_CARDS: dict[str, tuple[Behaviour, str]] = {
    "4242424242424242": (Behaviour.SUCCEEDS, N_("succeeds")),
    "4000000000000002": (Behaviour.DECLINED, N_("declined (402, final)")),
    "4000000000000119": (Behaviour.UNAVAILABLE_ONCE, N_("gateway unavailable on the first try, then succeeds")),
    "4000000000000259": (Behaviour.ANSWER_LOST_ONCE, N_("charges, but the answer is lost on the first try")),
    "4000000000000077": (Behaviour.SLOW, N_("slow: the gateway takes a few seconds")),
    "4000000000000093": (Behaviour.VERY_SLOW, N_("very slow: the gateway takes 20 seconds (exercise 5)")),
}


def behaviour(card_number: str) -> Behaviour:
    """Any other valid card succeeds, as with a real provider's test mode."""
    entry = TEST_CARDS.get(digits_only(card_number))
    return entry[0] if entry else Behaviour.SUCCEEDS


def pretty(digits: str) -> str:
    return " ".join(digits[i : i + 4] for i in range(0, len(digits), 4))
