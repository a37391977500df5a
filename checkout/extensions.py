"""Extension objects, created unbound and bound in the app factory."""

from collections.abc import Callable
from typing import Any, TypeVar

from flask_migrate import Migrate
from flask_wtf.csrf import CSRFProtect

from checkout.database import db
from checkout.idempotency import Idempotency

__all__ = ["csrf", "csrf_exempt", "db", "migrate", "once"]

migrate = Migrate()
csrf = CSRFProtect()
once = Idempotency(db=db)  # its record table joins db.metadata now; bound to the app in create_app

View = TypeVar("View", bound=Callable[..., Any])


def csrf_exempt(view: View) -> View:
    """``csrf.exempt`` for one view, keeping its type (Flask-WTF ships no type information)."""
    csrf.exempt(view)
    return view
