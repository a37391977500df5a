"""gunicorn settings for serving the shop with several workers (`make serve`).

Every worker must share the database and the SECRET_KEY (sessions, CSRF and
the request fingerprints depend on it); in development the key is generated
once into the instance folder, which every worker reads.
Several app servers on several machines share one PostgreSQL.
"""

import os

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
