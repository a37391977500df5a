"""Which app server each worker belongs to, so the lab's timeline can say where every attempt landed.

Behind ``make proxy`` (two app servers on one machine) a pid alone does not say which server a resent request reached.
Design: docs/lab.md#checkoutlabserverspy-which-app-server-each-worker-belongs-to
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from datetime import datetime

import sqlalchemy as sa
from flask import Flask
from sqlalchemy.orm import Mapped, mapped_column

from checkout.config import settings
from checkout.database import Base, UTCDateTime, insert_ignoring_conflicts, utcnow, writing
from checkout.extensions import db
from checkout.idempotency.store import worker_name


class LabWorker(Base):
    """One worker process of a named app server: its name in the audit trail, and its server's."""

    __tablename__ = "lab_workers"

    worker: Mapped[str] = mapped_column(sa.String(64), primary_key=True)  # host:pid, as the events name it
    server: Mapped[str] = mapped_column(sa.String(64))
    started_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


def register_server_name(app: Flask) -> None:
    """With ``CHECKOUT_SERVER_NAME`` set, each worker process records its server's name at its first request."""
    name = settings(app).server_name
    if not name:
        return
    registered: dict[str, int] = {}
    guard = threading.Lock()

    @app.before_request
    def _name_this_worker() -> None:
        # gunicorn forks its workers after the app is made: each process writes its own row, once.
        if registered.get("pid") == os.getpid():
            return
        with guard:
            if registered.get("pid") == os.getpid():
                return
            with writing() as session:
                session.execute(
                    insert_ignoring_conflicts(LabWorker, session),
                    [{"worker": worker_name(), "server": name, "started_at": utcnow()}],
                )
            registered["pid"] = os.getpid()


def servers_of(workers: Iterable[str]) -> dict[str, str]:
    """The server name of each of these workers that has one."""
    wanted = sorted(set(workers))
    if not wanted:
        return {}
    rows = db.session.execute(sa.select(LabWorker.worker, LabWorker.server).where(LabWorker.worker.in_(wanted)))
    return {str(worker): str(server) for worker, server in rows}
