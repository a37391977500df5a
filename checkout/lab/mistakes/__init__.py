"""The seeds' mistakes, side by side with the fix: nine deliberately wrong twins of ``POST /api/orders``.

Each twin lives at ``POST /api/lab/mistakes/<name>/orders`` (lab only), takes the
same body and headers as the real endpoint, and shares the shop's orders, stock,
emails and gateway (``plumbing``): so each module shows one mistake and nothing
else, and the lab's damage table counts its money on its own row
(``orders.path = "mistake:<name>"``). ``catalog`` describes them for the pages
and the README; ``views`` serves them. Nothing here is reachable from the real
checkout.
"""
