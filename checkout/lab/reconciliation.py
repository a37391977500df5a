"""The reconciliation report in the lab (``/lab/reconciliation``), beside the legacy gateway it is for.

The same report as ``flask --app checkout gateway reconcile-report``
(checkout.shop.reconciliation_report). Lab only.
"""

from __future__ import annotations

from flask import Blueprint, render_template
from flask.typing import ResponseReturnValue

from checkout.lab import damage, lab_only
from checkout.lab.legacy import LEGACY_ENDPOINT, LEGACY_PATH, NO_LOOKUP_ENDPOINT, NO_LOOKUP_PATH
from checkout.shop.reconciliation_report import KINDS, reconciliation_report

bp = lab_only(Blueprint("reconciliation", __name__))


@bp.get("/lab/reconciliation")
def page() -> ResponseReturnValue:
    report = reconciliation_report()
    by_path = damage.by_path()
    return render_template(
        "lab/reconciliation.html",
        report=report,
        kinds=KINDS,
        legacy_endpoint=LEGACY_ENDPOINT,
        no_lookup_endpoint=NO_LOOKUP_ENDPOINT,
        paths=[(LEGACY_PATH, by_path.get(LEGACY_PATH)), (NO_LOOKUP_PATH, by_path.get(NO_LOOKUP_PATH))],
    )
