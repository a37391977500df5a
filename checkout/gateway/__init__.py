"""The mock payment gateway: its own ledger, idempotent on the gateway key.

It knows nothing of the shop or of the idempotency engine.
"""

from checkout.gateway.client import (
    CardDeclined,
    Charge,
    Gateway,
    GatewayError,
    GatewayTimeout,
    GatewayUnavailable,
    InvalidAmount,
    InvalidCard,
    KeyReused,
    KeyVoided,
    NoSuchCharge,
    ReferenceAlreadyCharged,
    Refund,
    RefundExceedsCharge,
)
from checkout.gateway.legacy import LegacyGateway
from checkout.gateway.models import DECLINED, SUCCEEDED, GatewayCharge, GatewayEvent, GatewayRefund

__all__ = [
    "DECLINED",
    "SUCCEEDED",
    "CardDeclined",
    "Charge",
    "Gateway",
    "GatewayCharge",
    "GatewayError",
    "GatewayEvent",
    "GatewayRefund",
    "GatewayTimeout",
    "GatewayUnavailable",
    "InvalidAmount",
    "InvalidCard",
    "KeyReused",
    "KeyVoided",
    "LegacyGateway",
    "NoSuchCharge",
    "ReferenceAlreadyCharged",
    "Refund",
    "RefundExceedsCharge",
]
