"""gunicorn settings for serving the shop with several workers (`make serve`).

Every worker must share the database and the SECRET_KEY (sessions, CSRF and
the request fingerprints depend on it); in development the key is generated
once into the instance folder, which every worker reads.
Several app servers on several machines share one PostgreSQL.
Set CHECKOUT_SHOP_URL to the address you bind (``make serve`` does): the lab
and the webhook relay send their requests there, never to a Host header.
No hook here starts a thread, and the app starts one only to carry on an
operation it answered 202 (checkout/idempotency/carry.py): the relays are
processes of their own (Procfile.serve, which ``make serve`` starts).
"""

import contextlib
import fcntl
import glob
import os
import shutil
import tempfile
import time

bind = os.environ.get("GUNICORN_BIND", "127.0.0.1:5000")
workers = int(os.environ.get("GUNICORN_WORKERS", "4"))
# Threads: a duplicate browser submit waits (bounded) for the first; it must not block a whole worker.
worker_class = "gthread"
threads = int(os.environ.get("GUNICORN_THREADS", "4"))
timeout = int(os.environ.get("GUNICORN_TIMEOUT", "60"))
graceful_timeout = 10
accesslog = "-"
errorlog = "-"
# gunicorn 27 would otherwise write a control socket under the home folder.
control_socket_disable = True
# The app is built once, in the master, and every worker is a fork of it: a worker starts (or is replaced after
# a crash, exercise 5) in milliseconds instead of importing the shop again (a second of CPU each). GUNICORN_PRELOAD=0
# turns it off. A fork shares the master's connections, so each worker drops them first (post_fork).
preload_app = os.environ.get("GUNICORN_PRELOAD", "1") != "0"


def post_fork(server, worker):
    """A forked worker opens connections of its own: those the master's pool holds stay the master's."""
    app = server.app.wsgi() if preload_app else None
    sqlalchemy = getattr(app, "extensions", {}).get("sqlalchemy")
    if sqlalchemy is not None:
        with app.app_context():
            for engine in sqlalchemy.engines.values():
                engine.dispose(close=False)


# Metrics: each worker counts in its own process; prometheus-client adds up the files every
# worker writes into one folder (its multiprocess mode). A fresh folder per start, so no count
# survives from an earlier run. The master and its workers share a lock on the folder's
# master.lock while they live, and each start first removes every checkout-metrics-* folder
# whose lock nobody holds: left by a master that was killed or crashed (on_exit never ran), never
# one of a running server. Set at the top, before anything imports prometheus_client (it reads
# the variable once, at import), so --preload works too; a lock rather than a pid, so --daemon's
# fork and a USR2 re-exec keep the folder theirs. If you set PROMETHEUS_MULTIPROC_DIR yourself,
# empty it before.
METRICS_PREFIX = "checkout-metrics-"
METRICS_LOCK = "master.lock"


def _abandoned(folder):
    """Nobody holds the folder's lock (no lock file: another tool's folder, or one being made now)."""
    try:
        fd = os.open(os.path.join(folder, METRICS_LOCK), os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _hold(folder, name=METRICS_LOCK):
    """Share the folder's lock while this process and its workers live (the fd stays open till exit)."""
    fd = os.open(os.path.join(folder, name), os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_SH)
    os.environ["GUNICORN_METRICS_LOCK"] = f"{os.getpid()}:{fd}"


def _held_here():
    """This process took its share already (gunicorn reads this file again on a HUP)."""
    return os.environ.get("GUNICORN_METRICS_LOCK", "").partition(":")[0] == str(os.getpid())


def _ours(folder):
    return os.path.basename(folder).startswith(METRICS_PREFIX)


if "PROMETHEUS_MULTIPROC_DIR" not in os.environ:
    for _folder in glob.glob(os.path.join(tempfile.gettempdir(), METRICS_PREFIX + "*")):
        if _abandoned(_folder):
            shutil.rmtree(_folder, ignore_errors=True)
    _folder = tempfile.mkdtemp(prefix=METRICS_PREFIX)
    _hold(_folder, ".lock")  # named master.lock only once held, so no start can find it free
    os.rename(os.path.join(_folder, ".lock"), os.path.join(_folder, METRICS_LOCK))
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = _folder
elif _ours(os.environ["PROMETHEUS_MULTIPROC_DIR"]) and not _held_here():
    _hold(os.environ["PROMETHEUS_MULTIPROC_DIR"])  # a new master after a USR2 re-exec shares it too


def child_exit(server, worker):
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)


def on_exit(server):
    """Remove our folder, unless another master still uses it (the new one after a USR2 re-exec)."""
    folder = os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")
    if not _ours(folder):
        return  # yours: you empty it
    fd = os.environ.get("GUNICORN_METRICS_LOCK", "").partition(":")[2]
    if fd.isdigit():
        with contextlib.suppress(OSError):
            os.close(int(fd))  # our own share of the lock
    # Workers still busy at the graceful timeout were sent SIGKILL a moment ago and may not be gone yet: their
    # shares of the lock go with them. Wait a few seconds for that, no longer (a new master's share never goes).
    for _ in range(50):
        if _abandoned(folder):
            shutil.rmtree(folder, ignore_errors=True)
            return
        time.sleep(0.1)
