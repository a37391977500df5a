"""Teaching pages: watch every layer of the defence work, and the bug it prevents.

Every lab route answers 404 unless the lab is on (``CHECKOUT_LAB``; always
off in production).
"""

from flask import Blueprint, abort

from checkout.config import settings


def lab_only(blueprint: Blueprint) -> Blueprint:
    @blueprint.before_request
    def _lab_must_be_on() -> None:
        if not settings().lab:
            abort(404)

    return blueprint
