"""``make proxy``: the shop behind Debian's nginx, two app servers on one database, a proxy that resends.

    .venv/bin/python -m checkout.lab.proxy --listen 127.0.0.1:5000
    honcho start -f Procfile.proxy -e instance/proxy/proxy.env

This writes nginx's files (``deploy/nginx/checkout.conf.template``, filled in) and ``proxy.env`` into the instance
folder's ``proxy/``; honcho starts nginx, the two servers and the relays from ``Procfile.proxy`` with it. nginx
waits ``--read-timeout`` for the answer to a POST it may resend, then sends it to the other server. The tests start
the same configuration in front of their own servers (``nginx()`` below).
Design: docs/operations.md#several-workers-several-servers
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "deploy" / "nginx" / "checkout.conf.template"
SERVER_NAMES = ("app-1", "app-2")
READ_TIMEOUT = "1s"  # shorter than the slow card (CHECKOUT_SLOW_CARD_SECONDS, 3 s): the workshop sees the resend
_NGINX_TIME = re.compile(r"(\d+)(ms|s|m|h|d)?")  # one part of an nginx time: 1m30s is two
_NGINX_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
HOW_TO_GET_NGINX = """\
make proxy needs nginx, and there is none on this machine (looked in PATH, /usr/sbin, /usr/local/sbin).
  Debian or Ubuntu:  sudo apt-get install nginx
  Fedora:            sudo dnf install nginx
  macOS (Homebrew):  brew install nginx
make proxy runs its own nginx as an ordinary process, from instance/proxy/: the system's nginx
service can stay stopped. Then run make proxy again."""

_PLACEHOLDER = re.compile(r"\$\{(PROXY_[A-Z0-9_]+)\}")


def wait_cap(read_timeout: str) -> int:
    """CHECKOUT_MAX_WAIT_SECONDS for servers behind nginx: a duplicate that waits (``Prefer: wait``) answers a
    second before nginx would give up on it, so the client gets the shop's 409 and Retry-After, not a 504."""
    text, seconds, at = read_timeout.strip(), 0.0, 0
    for part in _NGINX_TIME.finditer(text):
        if part.start() != at:
            break
        seconds, at = seconds + int(part[1]) * _NGINX_UNITS[part[2] or "s"], part.end()
    if not text or at != len(text):
        raise ValueError(f"--read-timeout: not an nginx time: {read_timeout!r} (say 1s, 1500ms or 1m30s)")
    return max(0, int(seconds) - 1)


class NginxMissing(RuntimeError):
    """There is no nginx to run."""


def find_nginx() -> str | None:
    """nginx's path: in PATH, or where Debian puts it (/usr/sbin is not in an ordinary user's PATH)."""
    for candidate in (shutil.which("nginx"), "/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def render(template: str, values: Mapping[str, str]) -> str:
    """The template with every ``${PROXY_...}`` filled in (as envsubst does); nginx's own ``$names`` stay."""
    missing = sorted(set(_PLACEHOLDER.findall(template)) - set(values))
    if missing:
        raise KeyError(f"no value for {', '.join(missing)}")
    return _PLACEHOLDER.sub(lambda match: values[match.group(1)], template)


def site_config(*, listen: str, app_servers: Sequence[str], read_timeout: str, access_log: str) -> str:
    """deploy/nginx/checkout.conf.template, filled in."""
    first, second = app_servers
    return render(
        TEMPLATE.read_text(),
        {
            "PROXY_LISTEN": listen,
            "PROXY_APP_SERVER_1": first,
            "PROXY_APP_SERVER_2": second,
            "PROXY_READ_TIMEOUT": read_timeout,
            "PROXY_ACCESS_LOG": access_log,
        },
    )


def _configured(
    prefix: Path, listen: str, app_servers: Sequence[str], read_timeout: str, access_log: str, error_log: str
) -> list[str]:
    """nginx.conf and the site file in ``prefix`` (with the temporary folders nginx wants), checked by ``nginx -t``:
    the command line that runs them (``listen`` must be free)."""
    executable = find_nginx()
    if executable is None:
        raise NginxMissing(HOW_TO_GET_NGINX)
    if not port_is_free(listen):
        raise RuntimeError(f"{listen} is taken: stop what serves there (make run? make serve?), or pick another PORT")
    for folder in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (prefix / "temp" / folder).mkdir(parents=True, exist_ok=True)
    site = prefix / "checkout.conf"
    site.write_text(
        site_config(listen=listen, app_servers=app_servers, read_timeout=read_timeout, access_log=access_log)
    )
    conf = prefix / "nginx.conf"
    conf.write_text(main_config(prefix, site, error_log))
    command = [executable, "-p", str(prefix), "-c", str(conf)]
    check = subprocess.run([*command, "-t", "-q"], capture_output=True, text=True, check=False)
    if check.returncode != 0:
        raise RuntimeError(f"nginx refused {conf}:\n{check.stderr.strip()}")
    return command


def main_config(prefix: Path, site: Path, error_log: str) -> str:
    """The nginx.conf around the site file: everything nginx writes stays inside ``prefix``."""
    temp = prefix / "temp"
    return f"""\
# Written by checkout/lab/proxy.py (make proxy, and the tests): nginx as an ordinary process.
# Its pid and temporary files live in this folder; the site itself is {site.name}, from
# deploy/nginx/checkout.conf.template.
worker_processes 1;
pid "{prefix / "nginx.pid"}";
error_log {error_log} warn;
events {{
    worker_connections 512;
}}
http {{
    client_body_temp_path "{temp / "body"}";
    proxy_temp_path "{temp / "proxy"}";
    fastcgi_temp_path "{temp / "fastcgi"}";
    uwsgi_temp_path "{temp / "uwsgi"}";
    scgi_temp_path "{temp / "scgi"}";
    # Bodies (64 KiB at most) and answers stay in memory: nginx's workers never touch these folders.
    client_body_buffer_size 64k;
    proxy_max_temp_file_size 0;
    include "{site}";
}}
"""


# A line of the template's log_format checkout_upstreams, as far as a reader needs it.
_LOG_LINE = re.compile(
    r'"(?P<request>[^"]*)" (?P<status>\d{3}) upstreams="(?P<upstreams>[^"]*)" statuses="(?P<statuses>[^"]*)"'
)


@dataclass(frozen=True)
class Proxied:
    """One request as nginx's access log tells it: every server it was sent to, and what each answered."""

    request: str  # "POST /checkout HTTP/1.1"
    status: int  # what the client got
    upstreams: tuple[str, ...]  # ("127.0.0.1:5001", "127.0.0.1:5002"): sent twice
    statuses: tuple[str, ...]  # ("504", "303"): the first timed out, the second answered


@dataclass
class Proxy:
    url: str
    prefix: Path
    process: subprocess.Popen[bytes]
    access_log: Path  # one line per request: which servers it went to, and what each answered

    def requests(self, starting: str = "") -> list[Proxied]:
        """The requests nginx has finished so far, oldest first (those whose line starts with ``starting``)."""
        try:
            text = self.access_log.read_text()
        except FileNotFoundError:
            return []
        return [
            Proxied(
                match["request"],
                int(match["status"]),
                tuple(part.strip() for part in match["upstreams"].split(",")),
                tuple(part.strip() for part in match["statuses"].split(",")),
            )
            for match in _LOG_LINE.finditer(text)
            if match["request"].startswith(starting)
        ]


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host or "127.0.0.1", int(port)


def port_is_free(address: str) -> bool:
    """Nobody listens there. (SO_REUSEADDR, as nginx and gunicorn bind: the TIME_WAIT connections a server
    just stopped leaves behind do not count.)"""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(_split(address))
        except OSError:
            return False
    return True


def _listening(address: str) -> bool:
    try:
        with socket.create_connection(_split(address), timeout=1):
            return True
    except OSError:
        return False


def _wait_listening(process: subprocess.Popen[bytes], listen: str, timeout: float = 30) -> None:
    """Until nginx listens on ``listen``; an error if it exits or ``timeout`` passes first."""
    pause = threading.Event()
    for _ in range(int(timeout / 0.05)):
        if process.poll() is not None:
            raise RuntimeError(f"nginx on {listen} exited with {process.returncode}")
        if _listening(listen):
            return
        pause.wait(0.05)
    raise RuntimeError(f"nginx on {listen} did not start in {timeout:g} s")


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGQUIT, nginx's graceful end (it finishes the requests under way), then insist."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGQUIT)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextmanager
def nginx(
    prefix: Path,
    *,
    listen: str,
    app_servers: Sequence[str],
    read_timeout: str = READ_TIMEOUT,
    access_log: str | None = None,
    error_log: str | None = None,
    output: IO[bytes] | int | None = None,
) -> Iterator[Proxy]:
    """nginx with deploy/nginx/checkout.conf.template in front of ``app_servers``, until the block ends."""
    access = access_log or str(prefix / "access.log")
    command = _configured(prefix, listen, app_servers, read_timeout, access, error_log or str(prefix / "error.log"))
    process = subprocess.Popen([*command, "-g", "daemon off;"], stdout=output, stderr=subprocess.STDOUT)
    try:
        _wait_listening(process, listen)
        yield Proxy(f"http://{listen}", prefix, process, Path(access))
    finally:
        _stop(process)


# --- make proxy: the files honcho starts Procfile.proxy with ------------------------------------------------


def prepare(
    prefix: Path, *, listen: str, app_servers: Sequence[str], read_timeout: str, environ: Mapping[str, str]
) -> dict[str, str]:
    """nginx's files in ``prefix`` (checked with ``nginx -t``), and the environment the Procfile's processes share:
    nginx's command line, both servers' addresses, the cap on ``Prefer: wait`` (unless ``environ`` sets one)."""
    cap = wait_cap(read_timeout)
    taken = [address for address in app_servers if not port_is_free(address)]  # make proxy starts them: free
    if taken:
        raise RuntimeError(f"make proxy needs {', '.join(taken)}: stop what serves there, or pick another PORT.")
    executable = _configured(prefix, listen, app_servers, read_timeout, "/dev/stdout", "stderr")[0]
    for stale in prefix.glob("app-*.pid"):  # a server killed last time leaves its pid, which may be another's now
        stale.unlink()
    return {
        "PROXY_NGINX": executable,
        "PROXY_PREFIX": str(prefix),
        "PROXY_APP_1": app_servers[0],
        "PROXY_APP_2": app_servers[1],
        "CHECKOUT_MAX_WAIT_SECONDS": environ.get("CHECKOUT_MAX_WAIT_SECONDS", str(cap)),
        "CHECKOUT_SHOP_URL": environ.get("CHECKOUT_SHOP_URL") or f"http://{listen}",  # the lab's forms, webhooks
        "GUNICORN_WORKERS": environ.get("GUNICORN_WORKERS", "2"),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m checkout.lab.proxy",
        description="Write nginx's files and the environment honcho starts Procfile.proxy with (make proxy).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--listen", default="127.0.0.1:5000", help="nginx's address; the servers get the next 2 ports")
    parser.add_argument("--servers", help="the two servers' addresses, comma-separated (default: the next 2 ports)")
    parser.add_argument(
        "--read-timeout",
        default=READ_TIMEOUT,
        help="how long nginx waits for the answer to a POST it resends (reads: 5 s, other POSTs: 60 s)",
    )
    parser.add_argument("--prefix", type=Path, help="nginx's folder (default: the instance folder's proxy/)")
    args = parser.parse_args(argv)
    host, port = _split(args.listen)
    servers = args.servers.split(",") if args.servers else [f"{host}:{port + 1}", f"{host}:{port + 2}"]
    prefix = (args.prefix or Path(os.environ.get("CHECKOUT_INSTANCE_PATH") or ROOT / "instance") / "proxy").resolve()
    try:
        env = prepare(
            prefix, listen=args.listen, app_servers=servers, read_timeout=args.read_timeout, environ=os.environ
        )
    except (RuntimeError, ValueError, NginxMissing) as problem:
        print(problem, file=sys.stderr)
        return 1
    # honcho reads it as a shell would: quoted, a path with a space or a quote in it stays whole.
    (prefix / "proxy.env").write_text("".join(f"{name}={shlex.quote(value)}\n" for name, value in env.items()))
    print(
        f"\nThe shop, behind nginx: http://{args.listen}  (the lab: http://{args.listen}/lab)\n"
        f"  app-1: http://{servers[0]}\n  app-2: http://{servers[1]}\n"
        f"nginx waits {args.read_timeout} for a payment's answer, then sends the POST to the other server; each line "
        "of nginx's log names the servers a request went to. nginx answers 502 until app-1 and app-2 have started. "
        "A server that is stopped or killed leaves nginx and the other one serving. Ctrl-C stops them all.\n",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
