"""Alembic environment for Flask-Migrate and Flask-SQLAlchemy 3."""

import logging
from logging.config import fileConfig

from alembic import context
from flask import current_app

config = context.config
# Keep the app's loggers: migrations also run inside a live process (tests, boot).
fileConfig(config.config_file_name, disable_existing_loggers=False)
logger = logging.getLogger("alembic.env")

db = current_app.extensions["migrate"].db
config.set_main_option("sqlalchemy.url", db.engine.url.render_as_string(hide_password=False).replace("%", "%%"))


def run_migrations_offline() -> None:
    context.configure(url=config.get_main_option("sqlalchemy.url"), target_metadata=db.metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def render_item(type_, obj, autogen_context):
    """Render the project's UTCDateTime as the plain column type it stores, so migrations need no app import."""
    if type_ == "type" and obj.__class__.__name__ == "UTCDateTime":
        return "sa.DateTime(timezone=True)"
    return False


def run_migrations_online() -> None:
    def process_revision_directives(context, revision, directives):
        if getattr(config.cmd_opts, "autogenerate", False) and directives[0].upgrade_ops.is_empty():
            directives[:] = []
            logger.info("No changes in schema detected.")

    conf_args = dict(current_app.extensions["migrate"].configure_args)
    conf_args.setdefault("process_revision_directives", process_revision_directives)
    conf_args.setdefault("render_as_batch", True)  # SQLite alters tables by copying them
    conf_args.setdefault("render_item", render_item)

    with db.engine.connect() as connection:
        sqlite = connection.dialect.name == "sqlite"
        if sqlite:
            # Batch mode copies a table and drops the old one; with foreign keys on (checkout.database turns
            # them on for every connection) that DROP fails, or cascades into its children. Off while the
            # tables are copied (outside a transaction: SQLite ignores the pragma inside one), checked after.
            connection.connection.driver_connection.execute("PRAGMA foreign_keys=OFF")  # before any BEGIN
        context.configure(connection=connection, target_metadata=db.metadata, **conf_args)
        with context.begin_transaction():
            context.run_migrations()
            if sqlite:
                broken = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
                if broken:
                    raise RuntimeError(f"the migration left rows whose foreign keys point nowhere: {broken[:5]}")
        if sqlite:
            connection.connection.driver_connection.execute("PRAGMA foreign_keys=ON")


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
