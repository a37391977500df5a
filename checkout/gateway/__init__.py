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
    InvalidCard,
    KeyReused,
    ReferenceAlreadyCharged,
)
from checkout.gateway.models import DECLINED, SUCCEEDED, GatewayCharge, GatewayFaultMark

__all__ = [
    "DECLINED",
    "SUCCEEDED",
    "CardDeclined",
    "Charge",
    "Gateway",
    "GatewayCharge",
    "GatewayError",
    "GatewayFaultMark",
    "GatewayTimeout",
    "GatewayUnavailable",
    "InvalidCard",
    "KeyReused",
    "ReferenceAlreadyCharged",
]
