"""Configuration read by the app factory: defaults, then the environment, then the caller's mapping.

Every ``CHECKOUT_*`` setting is declared once in ``SETTINGS`` with its type and
its meaning. Nothing is silently ignored: an unknown ``CHECKOUT_*`` variable
(a typo), a value of the wrong type, an unknown ``CHECKOUT_ENV`` or a rule
broken between two settings stops the app at start with a message that says
what to change.
"""

from __future__ import annotations

import difflib
import os
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from werkzeug.sansio.utils import host_is_trusted

ENVIRONMENTS = ("development", "production")

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def parse_bool(value: str | bool) -> bool:
    if isinstance(value, bool):
        return value
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValueError(f"not a boolean: {value!r} (use true/false/1/0)")


def parse_environment(value: str) -> str:
    """``Production``, ``PRODUCTION`` and `` production`` are production; anything unknown is refused."""
    normalised = value.strip().lower()
    if normalised not in ENVIRONMENTS:
        raise ValueError(f"not an environment: {value!r} (use {' or '.join(ENVIRONMENTS)})")
    return normalised


def _positive(kind: Callable[[str], float]) -> Callable[[str], Any]:
    def parse(value: str) -> Any:
        number = kind(value.strip())
        if number <= 0:
            raise ValueError(f"must be more than zero, not {value!r}")
        return number

    return parse


def _text(value: str) -> str:
    return value.strip()


def _rate(value: str) -> float:
    rate = float(value.strip())
    if not 0 <= rate <= 1:
        raise ValueError(f"must be from 0 to 1, not {value!r}")
    return rate


def _http_url(value: str) -> str:
    """An http(s) address with a host: the shop sends requests there, so it is configured, never guessed."""
    url = value.strip()
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:  # not a number, or out of range
        port = -1
    if parts.scheme not in ("http", "https") or not parts.hostname or port == -1 or parts.query or parts.fragment:
        raise ValueError(f"must be an http:// or https:// URL with a host, not {value!r}")
    return url


def _base_url(value: str) -> str:
    return _http_url(value).rstrip("/")


def _optional_http_url(value: str) -> str:
    return _http_url(value) if value.strip() else ""


def _host_names(value: str) -> tuple[str, ...]:
    """``shop.example, .shop.example``: names, not URLs (a leading dot allows every subdomain)."""
    names = tuple(name.strip().lower() for name in value.split(",") if name.strip())
    for name in names:
        if "/" in name or ":" in name or any(character.isspace() for character in name):
            raise ValueError(f"{name!r} is not a host name: give names like shop.example, without scheme or port")
    return names


def _server_name(value: str) -> str:
    """A short label (``app-1``): it names a server in the lab's timeline."""
    name = value.strip()
    if len(name) > 64 or any(not character.isprintable() for character in name):
        raise ValueError(f"must be at most 64 printable characters, not {value!r}")
    return name


@dataclass(frozen=True)
class Setting:
    default: Any
    parse: Callable[[str], Any]
    meaning: str


SETTINGS: dict[str, Setting] = {
    "CHECKOUT_ENV": Setting("development", parse_environment, "development or production"),
    "CHECKOUT_INSTANCE_PATH": Setting("", _text, "where secrets, the SQLite file and the Maildir live"),
    "CHECKOUT_FINGERPRINT_SECRET": Setting(
        "", _text, "keys the request fingerprints (they cover card numbers); its own secret, not SECRET_KEY"
    ),
    "CHECKOUT_KEY_LIFETIME_SECONDS": Setting(24 * 3600, _positive(int), "how long a completed key is replayed"),
    "CHECKOUT_LEASE_SECONDS": Setting(30.0, _positive(float), "how long a worker owns an operation in progress"),
    "CHECKOUT_GATEWAY_TIMEOUT_SECONDS": Setting(25.0, _positive(float), "how long the shop waits for the gateway"),
    "CHECKOUT_SLOW_CARD_SECONDS": Setting(3.0, _positive(float), "how long the slow test card takes"),
    "CHECKOUT_VERY_SLOW_CARD_SECONDS": Setting(
        20.0, _positive(float), "how long the very slow test card takes (time to kill a worker by hand)"
    ),
    "CHECKOUT_BROWSER_WAIT_SECONDS": Setting(
        8.0, _positive(float), "how long a duplicate browser submit waits for the first"
    ),
    "CHECKOUT_WAITERS_PER_KEY": Setting(
        2, _positive(int), "how many duplicates of one key may wait at once in one worker; the rest answer at once"
    ),
    "CHECKOUT_RATE_LIMIT": Setting(
        "10000 per minute", _text, "requests per client (API token, else address); off turns limits off"
    ),
    "CHECKOUT_REDIS_URL": Setting(
        "", _text, "Redis, for rate-limit counters shared by every worker, and the lab's Redis store of keys"
    ),
    "CHECKOUT_LAB": Setting(True, parse_bool, "the teaching pages; always off in production"),
    "CHECKOUT_SHOP_URL": Setting(
        "http://127.0.0.1:5000",
        _base_url,
        "this shop's own address, where its server-side requests go (the lab's forms, the default webhook URL)",
    ),
    "CHECKOUT_SERVER_NAME": Setting(
        "",
        _server_name,
        "this app server's name in the lab's timeline (make proxy names its two app-1 and app-2); "
        "empty: the lab names workers by host:pid only",
    ),
    "CHECKOUT_TRUSTED_HOSTS": Setting(
        (),
        _host_names,
        "the host names this shop answers to, comma-separated (Flask's TRUSTED_HOSTS; another Host gets 400); "
        "required in production, any host in development when empty",
    ),
    "CHECKOUT_WEBHOOK_URL": Setting(
        "",
        _optional_http_url,
        "where the gateway delivers its events (default: CHECKOUT_SHOP_URL + /webhooks/gateway); "
        "flask gateway deliver needs it in production",
    ),
    "CHECKOUT_WEBHOOK_SECRET": Setting("", _text, "signs the gateway's webhooks; generated once in development"),
    "CHECKOUT_WEBHOOK_DUPLICATE_RATE": Setting(
        0.2, _rate, "the share of events the gateway delivers twice on purpose (0 to 1)"
    ),
    "CHECKOUT_SMTP_URL": Setting("", _text, "smtp://host:port sends the outbox by SMTP; unset: into a Maildir"),
    "CHECKOUT_OUTBOX_RELAY": Setting(
        True,
        parse_bool,
        "off: make run, make serve and make proxy start no outbox relay process (exercise 9 runs it by hand)",
    ),
}

# Settings that are gone, and what to do instead: refused with this, not with a guess at a similar name.
RETIRED: dict[str, str] = {
    "CHECKOUT_WEBHOOK_RELAY": (
        "no web worker delivers webhooks any more: the relay is its own process, "
        "flask --app checkout gateway deliver --forever (make run and make serve start it, see Procfile); "
        "remove the variable"
    ),
}

FLASK_DEFAULTS: dict[str, Any] = {
    # Bodies over 64 KiB get 413 (checked on chunked bodies too, see checkout.security).
    "MAX_CONTENT_LENGTH": 64 * 1024,
    "SQLALCHEMY_ENGINE_OPTIONS": {"pool_pre_ping": True, "hide_parameters": True},  # logged errors: no emails, ids
    "WTF_CSRF_TIME_LIMIT": None,
    "SESSION_COOKIE_SAMESITE": "Lax",
    "SESSION_COOKIE_HTTPONLY": True,
}

# Example values from documentation and tutorials: refused in production whatever their length.
KNOWN_EXAMPLE_SECRETS = {
    "change-me",
    "changeme",
    "change-this",
    "secret",
    "secret-key",
    "secret_key",
    "development",
    "dev",
    "test",
    "test-secret-key",
    "password",
    "your-secret-key",
    "replace-me",
}
MIN_SECRET_LENGTH = 32
MIN_DISTINCT_CHARACTERS = 10


def defaults() -> dict[str, Any]:
    return {**FLASK_DEFAULTS, **{name: setting.default for name, setting in SETTINGS.items()}}


def from_environment(environ: Mapping[str, str]) -> dict[str, Any]:
    """The settings the environment gives, typed; an unknown or malformed one is an error."""
    config: dict[str, Any] = {}
    for name, raw in environ.items():
        if not name.startswith("CHECKOUT_"):
            continue
        if name in RETIRED:
            raise ValueError(f"{name} is no longer a setting: {RETIRED[name]}")
        setting = SETTINGS.get(name)
        if setting is None:
            close = difflib.get_close_matches(name, SETTINGS, n=1)
            hint = f"; did you mean {close[0]}?" if close else f"; the settings are: {', '.join(sorted(SETTINGS))}"
            raise ValueError(f"unknown setting {name}{hint}")
        try:
            config[name] = setting.parse(raw)
        except ValueError as error:
            raise ValueError(f"{name}={raw!r} is not valid: {error}") from None
    if environ.get("DATABASE_URL"):
        config["SQLALCHEMY_DATABASE_URI"] = environ["DATABASE_URL"]
    if environ.get("SECRET_KEY"):
        config["SECRET_KEY"] = environ["SECRET_KEY"]
    return config


def weakness(secret: str) -> str | None:
    """Why a secret is too weak for production, or None."""
    if secret.strip().lower() in KNOWN_EXAMPLE_SECRETS:
        return "it is an example value from documentation"
    if len(secret) < MIN_SECRET_LENGTH:
        return f"it is shorter than {MIN_SECRET_LENGTH} characters"
    if len(set(secret)) < MIN_DISTINCT_CHARACTERS:
        return "it repeats too few characters to be random"
    return None


def _require_strong(name: str, secret: str) -> None:
    if not secret:
        raise ValueError(f"CHECKOUT_ENV=production needs {name} in the environment")
    reason = weakness(secret)
    if reason:
        raise ValueError(
            f"{name} is too weak for production: {reason}. Generate one with: "
            "python -c 'import secrets; print(secrets.token_hex(32))'"
        )


def instance_secret(instance_path: str, name: str) -> str:
    """A secret generated once into the instance folder, readable by its owner only.

    Every worker and every restart reads the same file, so sessions, CSRF
    tokens and fingerprints stay valid across workers.
    """
    path = Path(instance_path) / name
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    try:
        # O_EXCL: if two workers start at once, one writes and both read its value.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text().strip()
    with os.fdopen(fd, "w") as handle:
        handle.write(secrets.token_hex(32))
    return path.read_text().strip()


def prepare_instance_folder(instance_path: str) -> None:
    """The folder holds secrets and the SQLite file: only its owner may enter it."""
    folder = Path(instance_path)
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)


def _sqlite_file(uri: str) -> Path | None:
    prefix = "sqlite:///"
    if not uri.startswith(prefix) or uri == prefix or ":memory:" in uri:
        return None
    return Path(uri[len(prefix) :].split("?", 1)[0])


def _parsed(config: dict[str, Any], name: str) -> Any:
    """A setting the caller's mapping gave as text is checked as the environment's would be."""
    value = config[name]
    if not isinstance(value, str):
        return value
    try:
        return SETTINGS[name].parse(value)
    except ValueError as error:
        raise ValueError(f"{name}={value!r} is not valid: {error}") from None


def _addresses(config: dict[str, Any], production: bool) -> None:
    """Where the shop's own requests go, and which Host headers it answers: configured, never learned."""
    config["CHECKOUT_SHOP_URL"] = _parsed(config, "CHECKOUT_SHOP_URL")
    config["CHECKOUT_WEBHOOK_URL"] = _parsed(config, "CHECKOUT_WEBHOOK_URL")
    if not isinstance(config["CHECKOUT_TRUSTED_HOSTS"], str):  # a list from the caller's mapping
        config["CHECKOUT_TRUSTED_HOSTS"] = ",".join(config["CHECKOUT_TRUSTED_HOSTS"])
    hosts = config["CHECKOUT_TRUSTED_HOSTS"] = _parsed(config, "CHECKOUT_TRUSTED_HOSTS")
    if hosts:
        config["TRUSTED_HOSTS"] = list(hosts)
        # The shop's requests to itself carry these URLs' hosts: refused by the list, they would all get 400.
        own = {"CHECKOUT_WEBHOOK_URL": config["CHECKOUT_WEBHOOK_URL"]}
        if not production:  # the lab's forms, and the default webhook URL
            own["CHECKOUT_SHOP_URL"] = config["CHECKOUT_SHOP_URL"]
        for name, url in own.items():
            host = urlsplit(url).hostname
            if host and not host_is_trusted(host, hosts):
                raise ValueError(
                    f"{name}'s host {host} is not in CHECKOUT_TRUSTED_HOSTS: the shop would answer its own "
                    f"requests there with 400; add {host} to CHECKOUT_TRUSTED_HOSTS"
                )
    if not production:
        return
    if not hosts:
        raise ValueError(
            "CHECKOUT_ENV=production needs CHECKOUT_TRUSTED_HOSTS: the host names this shop answers to, "
            "comma-separated (for example shop.example,www.shop.example); any other Host header gets 400"
        )


def finalize(config: dict[str, Any], instance_path: str) -> None:
    """Apply the rules that depend on several settings at once; refuse what cannot work."""
    production = config["CHECKOUT_ENV"] == "production"
    if production:
        config["CHECKOUT_LAB"] = False
        config["SESSION_COOKIE_SECURE"] = True
        _require_strong("SECRET_KEY", str(config.get("SECRET_KEY") or ""))
        _require_strong("CHECKOUT_FINGERPRINT_SECRET", config["CHECKOUT_FINGERPRINT_SECRET"])
        _require_strong("CHECKOUT_WEBHOOK_SECRET", config["CHECKOUT_WEBHOOK_SECRET"])
        if config["CHECKOUT_FINGERPRINT_SECRET"] == config["SECRET_KEY"]:
            raise ValueError("CHECKOUT_FINGERPRINT_SECRET must differ from SECRET_KEY")
    else:
        if not config.get("SECRET_KEY"):
            config["SECRET_KEY"] = instance_secret(instance_path, "secret_key")
        if not config["CHECKOUT_FINGERPRINT_SECRET"]:
            config["CHECKOUT_FINGERPRINT_SECRET"] = instance_secret(instance_path, "fingerprint_secret")
        if not config["CHECKOUT_WEBHOOK_SECRET"]:
            config["CHECKOUT_WEBHOOK_SECRET"] = instance_secret(instance_path, "webhook_secret")
    _addresses(config, production)

    # A lease must outlive the longest gateway call, or reconcile could take over a payment whose
    # worker is still inside the call (the gateway key is fenced anyway; this keeps it rare).
    longest_call = float(config["CHECKOUT_GATEWAY_TIMEOUT_SECONDS"]) + float(config["CHECKOUT_SLOW_CARD_SECONDS"])
    if float(config["CHECKOUT_LEASE_SECONDS"]) <= longest_call:
        raise ValueError(
            f"CHECKOUT_LEASE_SECONDS={config['CHECKOUT_LEASE_SECONDS']} must be longer than "
            f"CHECKOUT_GATEWAY_TIMEOUT_SECONDS + CHECKOUT_SLOW_CARD_SECONDS ({longest_call:g})"
        )

    if not config.get("SQLALCHEMY_DATABASE_URI"):
        config["SQLALCHEMY_DATABASE_URI"] = "sqlite:///" + str(Path(instance_path) / "checkout.sqlite3")
    uri = config["SQLALCHEMY_DATABASE_URI"]
    if uri.startswith(("postgres://", "postgresql://")):
        # psycopg 3 is the driver we ship; accept the common short forms.
        config["SQLALCHEMY_DATABASE_URI"] = "postgresql+psycopg://" + uri.split("://", 1)[1]
    database_file = _sqlite_file(config["SQLALCHEMY_DATABASE_URI"])
    if database_file is not None and not database_file.exists():
        # Create it readable by its owner only, before SQLite creates it with the default umask.
        database_file.parent.mkdir(parents=True, exist_ok=True)
        os.close(os.open(database_file, os.O_WRONLY | os.O_CREAT, 0o600))
