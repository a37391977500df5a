"""Configuration read by the app factory: defaults, then the environment, then the caller's mapping.

Every ``CHECKOUT_*`` setting is a typed field of ``Settings`` (pydantic-settings, prefix ``CHECKOUT_``)
with its default, its bounds and its meaning; the rules between settings are its validators.
Nothing is silently ignored: an unknown ``CHECKOUT_*`` variable (a typo), a value of the wrong type,
an unknown ``CHECKOUT_ENV`` or a broken rule stops the app at start with a message that names the
variable and says what to change. ``from_environment`` takes the variables by name; ``finalize``
validates them with the caller's values in one pass, so every rule sees the values the app will use.
The app keeps the typed ``Settings`` (``settings()``), not strings in its config: only Flask's own keys stay there.
"""

from __future__ import annotations

import difflib
import os
import re
import secrets
from collections.abc import Mapping
from contextlib import suppress
from pathlib import Path
from typing import Annotated, Any, Literal, Self
from urllib.parse import urlsplit

import click
from flask import Flask, current_app
from pydantic import AfterValidator, BeforeValidator, Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict
from werkzeug.sansio.utils import host_is_trusted

PREFIX = "CHECKOUT_"
SETTINGS_KEY = "checkout.settings"  # where the app keeps its Settings (app.extensions)
ENVIRONMENTS = ("development", "production")
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


class ConfigurationError(ValueError, click.ClickException):
    """A setting to fix. A ValueError to the code; to the ``flask`` command a ClickException, which it
    prints as one line (``Error: ...``), not as a traceback."""

    def __init__(self, message: str) -> None:
        click.ClickException.__init__(self, message)


def parse_bool(value: object) -> bool:
    if isinstance(value, bool):
        return value
    lowered = str(value).strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValueError(f"not a boolean: {value!r} (use true/false/1/0)")


def _relay(value: object) -> bool:
    return True if str(value).strip().lower() == "thread" else parse_bool(value)


def _environment(value: object) -> str:
    """``Production``, ``PRODUCTION`` and `` production`` are production; anything unknown is refused."""
    normalised = str(value).strip().lower()
    if normalised not in ENVIRONMENTS:
        raise ValueError(f"not an environment: {value!r} (use {' or '.join(ENVIRONMENTS)})")
    return normalised


def _http_url(url: str) -> str:
    """An http(s) address with a host: the shop sends requests there, so it is configured, never guessed."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:  # not a number, or out of range
        port = -1
    if parts.scheme not in ("http", "https") or not parts.hostname or port == -1 or parts.query or parts.fragment:
        raise ValueError(f"must be an http:// or https:// URL with a host, not {url!r}")
    return url


def _host_names(value: object) -> tuple[str, ...]:
    """``shop.example, .shop.example`` (or a list): names, not URLs (a leading dot allows every subdomain)."""
    items = value.split(",") if isinstance(value, str) else value if isinstance(value, list | tuple) else [value]
    names = tuple(str(name).strip().lower() for name in items if str(name).strip())
    for name in names:
        if "/" in name or ":" in name or any(character.isspace() for character in name):
            raise ValueError(f"{name!r} is not a host name: give names like shop.example, without scheme or port")
        if "*" in name or name == ".":
            raise ValueError(
                f"{name!r} would trust any Host header: name the hosts (a leading dot allows every subdomain of one)"
            )
    return names


def _server_name(name: str) -> str:
    """A short label (``app-1``): it names a server in the lab's timeline."""
    if len(name) > 64 or any(not character.isprintable() for character in name):
        raise ValueError(f"must be at most 64 printable characters, not {name!r}")
    return name


def _amqp_url(url: str) -> str:
    """amqp(s)://user:password@host:port/vhost, or off (the events wait in the outbox, and the lab says so)."""
    if url.lower() in ("", "off"):
        return ""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:  # not a number, or out of range
        port = -1
    if parts.scheme not in ("amqp", "amqps") or not parts.hostname or port == -1:
        raise ValueError("must be an amqp:// or amqps:// URL with a host (and a port from 1 to 65535), or off")
    return url


def without_password(value: object) -> object:
    """A URL as it may be shown (in an error, a log, a page): its password, if any, replaced by ***."""
    if not isinstance(value, str) or "://" not in value:
        return value
    parts = urlsplit(value)
    if parts.password is None:
        return value
    return parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", ":***@", 1)).geturl()


def _amqp_name(name: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_.:-]{1,100}", name):
        raise ValueError(f"must be 1 to 100 letters, digits or _.:- (an exchange name), not {name!r}")
    return name


Boolean = Annotated[bool, BeforeValidator(parse_bool)]  # true/false/1/0/yes/no/on/off, any case
HttpUrl = Annotated[str, AfterValidator(_http_url)]
OptionalHttpUrl = Annotated[str, AfterValidator(lambda url: _http_url(url) if url else "")]
HostNames = Annotated[tuple[str, ...], NoDecode, BeforeValidator(_host_names)]  # NoDecode: a list, not JSON
Seconds = Annotated[float, Field(gt=0)]
Count = Annotated[int, Field(gt=0)]

# Example values from documentation and tutorials: refused in production whatever their length.
KNOWN_EXAMPLE_SECRETS = frozenset(
    "change-me changeme change-this secret secret-key secret_key development dev test test-secret-key password "  # noqa: SIM905 (a list literal: 15 lines)
    "your-secret-key replace-me".split()
)
MIN_SECRET_LENGTH = 32
MIN_DISTINCT_CHARACTERS = 10


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
    if reason := weakness(secret):
        raise ValueError(
            f"{name} is too weak for production: {reason}. Generate one with: "
            "python -c 'import secrets; print(secrets.token_hex(32))'"
        )


class Settings(BaseSettings):
    """Every ``CHECKOUT_*`` setting: ``CHECKOUT_`` + the field's name in capitals; under each, what it means.
    Readable on its own from the process environment (``Settings()``); the app builds it in ``finalize``."""

    model_config = SettingsConfigDict(env_prefix=PREFIX, str_strip_whitespace=True, use_attribute_docstrings=True)

    env: Annotated[Literal["development", "production"], BeforeValidator(_environment)] = "development"
    """development or production"""
    instance_path: str = ""
    """where secrets, the SQLite file and the Maildir live"""
    fingerprint_secret: str = ""
    """keys the request fingerprints (they cover card numbers); its own secret, not SECRET_KEY"""
    key_lifetime_seconds: Count = 24 * 3600
    """how long a completed key is replayed"""
    lease_seconds: Seconds = 30.0
    """how long a worker owns an operation in progress"""
    gateway_timeout_seconds: Seconds = 25.0
    """how long the shop waits for the gateway"""
    slow_card_seconds: Seconds = 3.0
    """how long the slow test card takes"""
    very_slow_card_seconds: Seconds = 20.0
    """how long the very slow test card takes (time to kill a worker by hand)"""
    browser_wait_seconds: Seconds = 8.0
    """how long a duplicate browser submit waits for the first"""
    waiters_per_key: Count = 2
    """how many duplicates of one key may wait at once in one worker; the rest answer at once"""
    max_wait_seconds: Annotated[int, Field(ge=0)] = 10
    """the cap on Prefer: wait=N; below a proxy's read timeout (make proxy sets it), or the proxy answers 504"""
    carriers: Annotated[int, Field(ge=0)] = 8
    """how many operations answered 202 (Prefer: respond-async) one worker carries on at once; past it, or 0,
    such a request gets the 409 or 503 it would without the preference"""
    rate_limit: str = "10000 per minute"
    """requests per client (API token, else address); off turns limits off"""
    redis_url: str = ""
    """Redis, for rate-limit counters shared by every worker, and the lab's Redis store of keys"""
    lab: Boolean = True
    """the teaching pages; always off in production"""
    shop_url: Annotated[HttpUrl, AfterValidator(lambda url: url.rstrip("/"))] = "http://127.0.0.1:5000"
    """this shop's own address, where its server-side requests go (the lab's forms, the default webhook URL)"""
    server_name: Annotated[str, AfterValidator(_server_name)] = ""
    """this app server's name in the lab's timeline (make proxy names its two app-1 and app-2); empty: the lab
    names workers by host:pid only"""
    trusted_hosts: HostNames = ()
    """the host names this shop answers to, comma-separated (Flask's TRUSTED_HOSTS; another Host gets 400);
    required in production, any host in development when empty"""
    webhook_url: OptionalHttpUrl = ""
    """where the gateway delivers its events (default: CHECKOUT_SHOP_URL + /webhooks/gateway); flask gateway
    deliver needs it in production"""
    webhook_secret: str = ""
    """signs the gateway's webhooks; generated once in development"""
    webhook_duplicate_rate: Annotated[float, Field(ge=0, le=1)] = 0.2
    """the share of events the gateway delivers twice on purpose (0 to 1)"""
    smtp_url: str = ""
    """smtp://host:port sends the outbox by SMTP; unset: into a Maildir"""
    outbox_relay: Annotated[bool, BeforeValidator(_relay)] = True
    """off: make run, make serve and make proxy start no outbox relay process (exercise 9 runs it by hand);
    "thread", the old name of the development default, means on: the relay is its own process now"""
    amqp_url: Annotated[str, AfterValidator(_amqp_url)] = "amqp://guest:guest@127.0.0.1:5672/%2F"
    """RabbitMQ, where the order-paid events go (amqp:// or amqps://); off: they wait in the outbox"""
    amqp_exchange: Annotated[str, AfterValidator(_amqp_name)] = "checkout"
    """the exchange the events are published to; its queues are named after it (checkout.loyalty)"""
    loyalty_consumer: Boolean = True
    """off: make run, make serve and make proxy start no loyalty consumer process (exercise 17 runs it by hand)"""
    secret_key: str = Field("", validation_alias="SECRET_KEY", exclude=True)
    """Flask's, not a CHECKOUT_* setting: here because production's rules compare the secrets"""

    @model_validator(mode="after")
    def _rules(self) -> Self:
        """What cannot work, or is unsafe, refused at start: each rule names the settings to change."""
        production = self.env == "production"
        if production:
            _require_strong("SECRET_KEY", self.secret_key)
            _require_strong("CHECKOUT_FINGERPRINT_SECRET", self.fingerprint_secret)
            _require_strong("CHECKOUT_WEBHOOK_SECRET", self.webhook_secret)
            if self.fingerprint_secret == self.secret_key:
                raise ValueError("CHECKOUT_FINGERPRINT_SECRET must differ from SECRET_KEY")
            if self.webhook_secret in (self.secret_key, self.fingerprint_secret):
                # Whoever can sign a webhook must not thereby be able to forge sessions or fingerprints.
                raise ValueError("CHECKOUT_WEBHOOK_SECRET must differ from SECRET_KEY and CHECKOUT_FINGERPRINT_SECRET")
        # The shop's requests to itself carry these URLs' hosts: refused by the list, they would all get 400.
        own = {"CHECKOUT_WEBHOOK_URL": self.webhook_url}
        if not production:  # the lab's forms, and the default webhook URL
            own["CHECKOUT_SHOP_URL"] = self.shop_url
        for name, url in own.items():
            host = urlsplit(url).hostname
            if self.trusted_hosts and host and not host_is_trusted(host, list(self.trusted_hosts)):
                raise ValueError(
                    f"{name}'s host {host} is not in CHECKOUT_TRUSTED_HOSTS: the shop would answer its own "
                    f"requests there with 400; add {host} to CHECKOUT_TRUSTED_HOSTS"
                )
        if production and not self.trusted_hosts:
            raise ValueError(
                "CHECKOUT_ENV=production needs CHECKOUT_TRUSTED_HOSTS: the host names this shop answers to, "
                "comma-separated (for example shop.example,www.shop.example); any other Host header gets 400"
            )
        # A lease must outlive the longest gateway call, or reconcile could take over a payment whose
        # worker is still inside the call (the gateway key is fenced anyway; this keeps it rare).
        longest_call = self.gateway_timeout_seconds + self.slow_card_seconds
        if self.lease_seconds <= longest_call:
            raise ValueError(
                f"CHECKOUT_LEASE_SECONDS={self.lease_seconds:g} must be longer than "
                f"CHECKOUT_GATEWAY_TIMEOUT_SECONDS + CHECKOUT_SLOW_CARD_SECONDS ({longest_call:g})"
            )
        return self


# Each field's variable, and what it means (the README documents every one).
NAMES = {field: PREFIX + field.upper() for field in Settings.model_fields if field != "secret_key"}
SETTINGS: dict[str, str | None] = {name: Settings.model_fields[field].description for field, name in NAMES.items()}

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
    # Logged errors: no emails, ids. No ping per checkout: PostgreSQL pings only a connection idle a while
    # (checkout.database), and a file does not hang up.
    "SQLALCHEMY_ENGINE_OPTIONS": {"pool_pre_ping": False, "hide_parameters": True},
    "WTF_CSRF_TIME_LIMIT": None,
    "SESSION_COOKIE_SAMESITE": "Lax",
    "SESSION_COOKIE_HTTPONLY": True,
}


def settings(app: Flask | None = None) -> Settings:
    """The app's settings, typed (``finalize`` made them): ``settings().lab``, ``settings(app).shop_url``."""
    found: Settings = (app or current_app).extensions[SETTINGS_KEY]
    return found


def from_environment(environ: Mapping[str, str]) -> dict[str, Any]:
    """The settings the environment gives (``finalize`` types them); an unknown name is an error at once."""
    config: dict[str, Any] = {}
    for name, raw in environ.items():
        if not name.startswith(PREFIX):
            continue
        if name in RETIRED:
            raise ConfigurationError(f"{name} is no longer a setting: {RETIRED[name]}")
        if name not in SETTINGS:
            close = difflib.get_close_matches(name, SETTINGS, n=1)
            hint = f"; did you mean {close[0]}?" if close else f"; the settings are: {', '.join(sorted(SETTINGS))}"
            raise ConfigurationError(f"unknown setting {name}{hint}")
        config[name] = raw.strip()
    if environ.get("DATABASE_URL"):
        config["SQLALCHEMY_DATABASE_URI"] = environ["DATABASE_URL"]
    if environ.get("SECRET_KEY"):
        config["SECRET_KEY"] = environ["SECRET_KEY"]
    return config


def _validated(values: Mapping[str, Any]) -> Settings:
    """``Settings`` from these values, or one line per problem (never pydantic's own report)."""
    try:
        return Settings.model_validate(values)
    except ValidationError as invalid:
        problems = []
        for error in invalid.errors(include_url=False):
            message = str(error["msg"]).removeprefix("Value error, ")
            if error["loc"]:  # one setting's value
                field = str(error["loc"][0])
                message = f"{NAMES.get(field, field)}={without_password(error['input'])!r} is not valid: {message}"
            problems.append(message)  # else a rule between settings, which names them itself
        raise ConfigurationError("\n".join(problems)) from None


def instance_secret(instance_path: str, name: str) -> str:
    """A secret generated once into the instance folder, readable by its owner only.

    Every worker and every restart reads the same file, so sessions, CSRF
    tokens and fingerprints stay valid across workers.
    """
    path = Path(instance_path) / name
    with suppress(FileNotFoundError):
        return path.read_text().strip()
    # Written whole under a name of its own, then linked into place: of processes starting at once, the
    # first link wins and every one reads that complete file (never one created and not yet written).
    draft = path.with_name(f".{name}.{os.getpid()}.{secrets.token_hex(4)}")
    with os.fdopen(os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as handle:
        handle.write(secrets.token_hex(32))
    try:
        with suppress(FileExistsError):
            os.link(draft, path)
    finally:
        draft.unlink()
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


def finalize(config: dict[str, Any], instance_path: str) -> Settings:
    """Type every setting and apply the rules between them (refusing what cannot work), then what follows: the
    typed settings, for the app to keep; ``config`` keeps Flask's keys alone (its ``CHECKOUT_*`` inputs are taken)."""
    values = {field: config.pop(name) for field, name in NAMES.items() if name in config}
    typed = _validated({**values, "SECRET_KEY": str(config.get("SECRET_KEY") or "")})
    if typed.env == "production":
        typed.lab = False
        config["SESSION_COOKIE_SECURE"] = True
    else:  # generated once into the instance folder, so every worker and restart shares them
        if not config.get("SECRET_KEY"):
            config["SECRET_KEY"] = instance_secret(instance_path, "secret_key")
        for field in ("fingerprint_secret", "webhook_secret"):
            if not getattr(typed, field):
                setattr(typed, field, instance_secret(instance_path, field))
    if typed.trusted_hosts:
        config["TRUSTED_HOSTS"] = list(typed.trusted_hosts)
    # The idempotency extension's own settings (checkout/idempotency/edge.py), as this shop names them.
    config.update(
        IDEMPOTENCY_LEASE_SECONDS=typed.lease_seconds,
        IDEMPOTENCY_LIFETIME_SECONDS=typed.key_lifetime_seconds,
        IDEMPOTENCY_WAITERS_PER_KEY=typed.waiters_per_key,
        IDEMPOTENCY_MAX_WAIT_SECONDS=typed.max_wait_seconds,
        IDEMPOTENCY_CARRIERS=typed.carriers,
        IDEMPOTENCY_SECRET=typed.fingerprint_secret,
    )

    if not config.get("SQLALCHEMY_DATABASE_URI"):
        config["SQLALCHEMY_DATABASE_URI"] = "sqlite:///" + str(Path(instance_path) / "checkout.sqlite3")
    uri = config["SQLALCHEMY_DATABASE_URI"]
    if uri.startswith(("postgres://", "postgresql://")):
        # psycopg 3 is the driver we ship; accept the common short forms.
        config["SQLALCHEMY_DATABASE_URI"] = "postgresql+psycopg://" + uri.split("://", 1)[1]
    engine_options = config.get("SQLALCHEMY_ENGINE_OPTIONS", {})
    if config["SQLALCHEMY_DATABASE_URI"].startswith("postgresql"):
        # Named, whatever the server's default or PGOPTIONS say: writing() continues a read into a
        # write on this promise (checkout.database), and it costs no statement (psycopg's BEGIN says it).
        config["SQLALCHEMY_ENGINE_OPTIONS"] = {**engine_options, "isolation_level": "READ COMMITTED"}
    database_file = _sqlite_file(config["SQLALCHEMY_DATABASE_URI"])
    if database_file is not None and not database_file.exists():
        # Create it readable by its owner only, before SQLite creates it with the default umask.
        database_file.parent.mkdir(parents=True, exist_ok=True)
        os.close(os.open(database_file, os.O_WRONLY | os.O_CREAT, 0o600))
    return typed
