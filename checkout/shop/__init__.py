"""The shop: catalog, cart, checkout, orders and the JSON API."""
