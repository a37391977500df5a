"""What the lab lets a workshop do by hand, so no exercise needs devtools or a fast typist.

Turn the Pay button's guard off, kill the worker holding a key's lease (the whole process: the exercise is the
crash), run reconcile now. The lab is never on in production, so neither are these.
Design: docs/design.md#checkoutlabcontrolspy-the-workshop-controls
"""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path

from flask import session

from checkout.i18n import _
from checkout.idempotency import RecordView

GUARD_OFF = "lab_button_guard_off"


def button_guard_on() -> bool:
    return not session.get(GUARD_OFF, False)


def template_switches() -> dict[str, bool]:
    """What the lab's switches tell the shop's pages (a context processor: the shop never imports the lab)."""
    return {"button_guard_on": button_guard_on()}


def set_button_guard(on: bool) -> None:
    if on:
        session.pop(GUARD_OFF, None)
    else:
        session[GUARD_OFF] = True


def holder_pid(view: RecordView) -> int | None:
    """The pid of the worker holding this key's live lease, if it runs on this machine and still lives."""
    pid = _local_holder(view)
    return pid if pid is not None and _alive(pid) else None


def dead_holder(view: RecordView) -> str | None:
    """What to say of the worker holding this key's live lease, if it ran on this machine and is dead (killed):
    its lease still runs, but there is nobody left to kill."""
    pid = _local_holder(view)
    if pid is None or not view.lease_live or _alive(pid):
        return None
    return _(
        "Worker %(pid)s is dead, and its lease still runs: when it runs out, a retry with this key, or reconcile, "
        "takes the payment over.",
        pid=pid,
    )


def _local_holder(view: RecordView) -> int | None:
    if not view.lease_holder:
        return None
    host, _, pid = view.lease_holder.rpartition(":")
    return int(pid) if host == socket.gethostname() and pid.isdigit() else None


def _alive(pid: int) -> bool:
    """Whether the process runs (a zombie, killed and not yet reaped by its parent, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: it exists
    fields = _stat(pid)
    return fields is None or fields[0] not in ("Z", "X")  # no /proc (macOS): the signal said it exists


def _parent_of(pid: int) -> int | None:
    """The parent pid of a process, or None if it cannot be read."""
    fields = _stat(pid)
    return int(fields[1]) if fields is not None and fields[1].isdigit() else None


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command's name (state, parent pid, ...); None without them
    (Linux only). The name is cut at its last ")": it may hold spaces and parentheses itself."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields if len(fields) >= 2 else None


def kill_holder(view: RecordView, *, under_gunicorn: bool) -> tuple[str, str]:
    """Whom to kill for this key, and what to tell the student.

    The action is "sibling" (killed now), "self" (the worker answering holds the
    key: the caller kills it once its answer is sent, as kill -9 would), or
    "none" (nothing to kill, with the reason).
    """
    if not view.lease_live or not view.lease_holder:
        return "none", _("Nobody holds this key’s lease right now: the payment is not running in any worker.")
    if (dead := dead_holder(view)) is not None:
        return "none", dead
    pid = holder_pid(view)
    if pid is None:
        return "none", _("The worker holding this key (%(holder)s) runs on another machine.", holder=view.lease_holder)
    if not under_gunicorn:
        return "none", _(
            "This shop runs as a single process (make run): killing the worker would kill the whole shop. "
            "Serve it with several workers (make serve), or run kill -9 %(pid)s yourself to see that happen.",
            pid=pid,
        )
    message = _("Killed worker %(pid)s with SIGKILL, as kill -9 %(pid)s would. Its lease runs out on its own.", pid=pid)
    if pid == os.getpid():
        return "self", message
    if _parent_of(pid) != os.getppid():
        return "none", _("Process %(pid)s is not a worker of this server; the lab kills only its own workers.", pid=pid)
    os.kill(pid, signal.SIGKILL)
    return "sibling", message


def kill_this_worker() -> None:
    os.kill(os.getpid(), signal.SIGKILL)
