"""A key's timeline drawn as a sequence diagram, in SVG made on the server: who spoke to whom, step by step.

Each audit event, in the order written, is one arrow between two lifelines; a duplicate that a layer stopped ends on
that layer with a bar, so a student sees where the second request was stopped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup, escape

from checkout.i18n import _

CLIENT, SHOP, DATABASE, GATEWAY, WEBHOOK = range(5)


@dataclass(frozen=True)
class Arrow:
    source: int
    target: int
    stopped: bool = False  # a duplicate stopped at the target: it goes no further
    lost: bool = False  # the message never arrived (dashed, with a cross)


# What each event was, as a message between two lifelines. An event not listed is drawn on the shop's line.
ARROWS: Mapping[str, Arrow] = {
    "received": Arrow(CLIENT, SHOP),
    "claimed": Arrow(SHOP, DATABASE),
    "resumed": Arrow(SHOP, DATABASE),
    "reconcile_started": Arrow(SHOP, DATABASE),
    "order_created": Arrow(SHOP, DATABASE),
    "payment_created": Arrow(SHOP, DATABASE),
    "refund_created": Arrow(SHOP, DATABASE),
    "order_found": Arrow(DATABASE, SHOP),
    "already_final": Arrow(DATABASE, SHOP),
    "already_paid": Arrow(DATABASE, SHOP),
    "already_refunded": Arrow(DATABASE, SHOP),
    "out_of_stock": Arrow(DATABASE, SHOP),
    "gateway_called": Arrow(SHOP, GATEWAY),
    "charged": Arrow(GATEWAY, SHOP),
    "declined": Arrow(GATEWAY, SHOP),
    "voided": Arrow(GATEWAY, SHOP),
    "refunded": Arrow(GATEWAY, SHOP),
    "gateway_unavailable": Arrow(GATEWAY, SHOP, lost=True),
    "answer_lost": Arrow(GATEWAY, SHOP, lost=True),
    "released": Arrow(SHOP, DATABASE),
    "discarded": Arrow(SHOP, DATABASE),
    "reconciled": Arrow(SHOP, DATABASE),
    "lease_lost": Arrow(DATABASE, SHOP, stopped=True),
    "record_lost": Arrow(DATABASE, SHOP),
    "completed": Arrow(SHOP, CLIENT),
    "accepted": Arrow(SHOP, CLIENT),  # 202: poll the Location
    # Duplicates, stopped where the layer that stopped them is.
    "replayed": Arrow(DATABASE, CLIENT),
    "conflict": Arrow(CLIENT, DATABASE, stopped=True),
    "mismatch": Arrow(CLIENT, DATABASE, stopped=True),
}

LEFT, TOP, GAP, ROW, BOTTOM = 24, 56, 150, 30, 24


def _title() -> str:
    return _("The key’s steps as messages between the client, the shop, its database, the gateway and its webhook")


def _x(lifeline: int) -> int:
    return LEFT + 60 + lifeline * GAP


def arrow_of(step: Mapping[str, Any]) -> Arrow:
    if step["event"] == "charged" and step.get("by") == "webhook":
        return Arrow(WEBHOOK, SHOP)
    return ARROWS.get(step["event"], Arrow(SHOP, SHOP))


def sequence_svg(steps: Sequence[Mapping[str, Any]]) -> Markup:
    """The timeline ``steps`` (checkout.lab.ledger.timeline) as an inline SVG, or nothing for no steps."""
    if not steps:
        return Markup("")
    names = [_("Client"), _("Shop"), _("Database"), _("Gateway"), _("Webhook")]
    width = _x(len(names) - 1) + 60 + LEFT
    height = TOP + ROW * len(steps) + BOTTOM
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="sequence" viewBox="0 0 {width} {height}" role="img" '
        f'aria-labelledby="sequence-title" data-testid="sequence">',
        f'<title id="sequence-title">{escape(_title())}</title>',
        '<defs><marker id="head" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="currentColor"/></marker></defs>',
    ]
    for index, name in enumerate(names):
        x = _x(index)
        parts.append(f'<text x="{x}" y="{TOP - 26}" text-anchor="middle" class="lifeline-name">{escape(name)}</text>')
        parts.append(f'<line x1="{x}" y1="{TOP - 16}" x2="{x}" y2="{height - BOTTOM / 2}" class="lifeline"/>')
    for row, step in enumerate(steps):
        label = str(step["event"]) + (f" by={step['by']}" if step.get("by") else "")
        parts.append(_message(arrow_of(step), label, TOP + ROW * row + ROW // 2))
    parts.append("</svg>")
    return Markup("".join(parts))


def _message(arrow: Arrow, label: str, y: int) -> str:
    start, end = _x(arrow.source), _x(arrow.target)
    event = escape(label.split()[0])  # the event's name, without what follows it ("charged by=webhook")
    joins = f'data-from="{arrow.source}" data-to="{arrow.target}"'  # which lifelines (0 the client ... 4 the webhook)
    css = "message" + (" lost" if arrow.lost else "") + (" stopped" if arrow.stopped else "")
    text = (
        f'<text x="{(start + end) / 2}" y="{y - 6}" text-anchor="middle" class="message-label">{escape(label)}</text>'
    )
    if start == end:  # a step inside one lifeline: a small loop
        return (
            f'<g class="{css}" data-event="{event}" {joins}><path d="M{start},{y - 8} h24 v12 h-22" fill="none" '
            f'marker-end="url(#head)"/><text x="{start + 30}" y="{y}" class="message-label">{escape(label)}</text></g>'
        )
    if arrow.lost:  # it never arrived: it stops short, crossed out
        end = start + (end - start) * 2 // 3
        cross = f'<path d="M{end - 5},{y - 5} l10,10 m0,-10 l-10,10" class="cross"/>'
        line = f'<line x1="{start}" y1="{y}" x2="{end}" y2="{y}"/>'
        return f'<g class="{css}" data-event="{event}" {joins}>{line}{cross}{text}</g>'
    bar = f'<line x1="{end}" y1="{y - 9}" x2="{end}" y2="{y + 9}" class="stop"/>' if arrow.stopped else ""
    return (
        f'<g class="{css}" data-event="{event}" {joins}><line x1="{start}" y1="{y}" x2="{end}" y2="{y}" '
        f'marker-end="url(#head)"/>{bar}{text}</g>'
    )
