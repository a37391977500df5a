"""Email that must arrive once: an outbox written in the transaction of what it tells, and a relay
that sends it at least once with a Message-ID derived from its row (so a receiver drops a resend)."""
