"""gunicorn settings for serving the shop with several workers (`make serve`).

Every worker must share the database and the SECRET_KEY (sessions, CSRF and
the request fingerprints depend on it); in development the key is generated
once into the instance folder, which every worker reads.
Several app servers on several machines share one PostgreSQL.
Set CHECKOUT_SHOP_URL to the address you bind (``make serve`` does): the lab
and the webhook relay send their requests there, never to a Host header.
"""

import os
import shutil
import tempfile

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

# Metrics: each worker counts in its own process; prometheus-client adds up the files every
# worker writes into one folder (its multiprocess mode). A fresh folder per start, so no count
# survives from an earlier run; if you set PROMETHEUS_MULTIPROC_DIR yourself, empty it before.
_metrics_folder = None
if "PROMETHEUS_MULTIPROC_DIR" not in os.environ:
    _metrics_folder = tempfile.mkdtemp(prefix="checkout-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = _metrics_folder


def child_exit(server, worker):
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)


def on_exit(server):
    if _metrics_folder:
        shutil.rmtree(_metrics_folder, ignore_errors=True)
