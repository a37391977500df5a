"""Nine deliberately wrong twins of ``POST /api/orders``, each the shop's payment pipeline with one part
swapped (``twin``), its module holding only that part. ``catalog`` describes them for the pages (their
words are in content/), ``views`` serves them at ``POST /api/lab/mistakes/<name>/orders``, lab only.
"""
