"""Configuration read by the app factory: defaults, then the environment.

Every ``CHECKOUT_*`` setting can be given as an environment variable;
booleans accept true/false/1/0 (and yes/no, on/off).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any

DEFAULTS: dict[str, Any] = {
    "CHECKOUT_ENV": "development",
    # How long a completed key is kept and replayed (seconds).
    "CHECKOUT_KEY_LIFETIME_SECONDS": 24 * 3600,
    # How long a worker owns an in-progress operation before a retry may take it over.
    "CHECKOUT_LEASE_SECONDS": 30.0,
    # How long the shop waits for the gateway before calling the outcome unknown.
    "CHECKOUT_GATEWAY_TIMEOUT_SECONDS": 10.0,
    # How long the slow test card (4000 0000 0000 0077) keeps the gateway busy.
    "CHECKOUT_SLOW_CARD_SECONDS": 3.0,
    # How long a duplicate browser submit waits for the first before a "still processing" page.
    "CHECKOUT_BROWSER_WAIT_SECONDS": 8.0,
    # The teaching pages (/lab, the unsafe checkout, the ledger JSON).
    "CHECKOUT_LAB": True,
    # Bodies over 64 KiB get 413.
    "MAX_CONTENT_LENGTH": 64 * 1024,
    "SQLALCHEMY_ENGINE_OPTIONS": {"pool_pre_ping": True},
    "WTF_CSRF_TIME_LIMIT": None,
    "SESSION_COOKIE_SAMESITE": "Lax",
    "SESSION_COOKIE_HTTPONLY": True,
}

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def parse_bool(value: str | bool) -> bool:
    if isinstance(value, bool):
        return value
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValueError(f"not a boolean: {value!r} (use true/false/1/0)")


def _coerce(name: str, raw: str) -> Any:
    """Give an environment string the type of the setting's default."""
    default = DEFAULTS.get(name)
    if isinstance(default, bool):
        return parse_bool(raw)
    if isinstance(default, int):
        return int(raw)
    if isinstance(default, float):
        return float(raw)
    return raw


def from_environment(environ: Mapping[str, str]) -> dict[str, Any]:
    config: dict[str, Any] = {}
    for name, raw in environ.items():
        if name.startswith("CHECKOUT_"):
            config[name] = _coerce(name, raw)
    if environ.get("DATABASE_URL"):
        config["SQLALCHEMY_DATABASE_URI"] = environ["DATABASE_URL"]
    if environ.get("SECRET_KEY"):
        config["SECRET_KEY"] = environ["SECRET_KEY"]
    return config


def development_secret(instance_path: str) -> str:
    """A secret generated once and kept in the instance folder.

    Every worker and every restart reads the same file, so sessions and
    CSRF tokens stay valid across workers.
    """
    path = Path(instance_path) / "secret_key"
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    candidate = secrets.token_hex(32)
    try:
        # O_EXCL: if two workers start at once, one writes and both read its value.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text().strip()
    with os.fdopen(fd, "w") as handle:
        handle.write(candidate)
    return candidate


def finalize(config: dict[str, Any], instance_path: str) -> None:
    """Apply the rules that depend on several settings at once."""
    production = config["CHECKOUT_ENV"] == "production"
    if production:
        config["CHECKOUT_LAB"] = False
        if not config.get("SECRET_KEY"):
            raise RuntimeError("CHECKOUT_ENV=production needs SECRET_KEY in the environment")
        config.setdefault("SESSION_COOKIE_SECURE", True)
    elif not config.get("SECRET_KEY"):
        config["SECRET_KEY"] = development_secret(instance_path)
    if not config.get("SQLALCHEMY_DATABASE_URI"):
        config["SQLALCHEMY_DATABASE_URI"] = "sqlite:///" + str(Path(instance_path) / "checkout.sqlite3")
    uri = config["SQLALCHEMY_DATABASE_URI"]
    if uri.startswith("postgres://") or uri.startswith("postgresql://"):
        # psycopg 3 is the driver we ship; accept the common short forms.
        config["SQLALCHEMY_DATABASE_URI"] = "postgresql+psycopg://" + uri.split("://", 1)[1]
