"""Extension objects, created unbound and bound in the app factory."""

from collections.abc import Callable
from typing import Any, TypeVar

from flask_migrate import Migrate
from flask_sqlalchemy import SQLAlchemy
from flask_wtf.csrf import CSRFProtect

from checkout.database import Base

# expire_on_commit=False: after a phase commits we still read the objects we
# wrote; reloading them would silently open a new transaction, which on SQLite
# would hold the lock while the gateway (on its own connection) waits for it.
db = SQLAlchemy(model_class=Base, session_options={"expire_on_commit": False})
migrate = Migrate()
csrf = CSRFProtect()

View = TypeVar("View", bound=Callable[..., Any])


def csrf_exempt(view: View) -> View:
    """``csrf.exempt`` for one view, keeping its type (Flask-WTF ships no type information)."""
    csrf.exempt(view)
    return view
