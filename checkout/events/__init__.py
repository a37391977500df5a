"""Events through a message broker (RabbitMQ): published from an outbox at least once, taken through an inbox once.

``outbox``: an event is written in the transaction that makes it true, and published later with publisher confirms.
``broker``: the publisher's round and the consumer's loop over pika; manual acks, after the handler committed.
``inbox``: what makes a redelivered message change nothing: a consumer's table, unique on the message id.
Nothing here knows the shop: the shop's events and its consumer are checkout/shop/loyalty.py.
Design: docs/design.md#checkoutevents-a-broker-that-redelivers
"""
