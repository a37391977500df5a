"""The ideas of the idempotency articles, each mapped to where this shop has it.

/lab/concepts renders them; the README's section "The ideas, mapped" says the
same in fewer words; tests/test_concepts.py checks that every file, function,
page, exercise, command and test named here exists.

Text in `backticks` is shown as code. The words are marked with ``N_`` and
translated where they are shown (the page's ``|t`` filter); code, paths and test
names are not words.
"""

from __future__ import annotations

from dataclasses import dataclass

from checkout.i18n import N_


@dataclass(frozen=True)
class InApp:
    """A place in the code: a file, and in it a function, class, method (``Class.method``) or constant."""

    path: str
    name: str | None
    what: str


@dataclass(frozen=True)
class InLab:
    """Where a workshop sees the idea: a page (a Flask endpoint), an exercise (its slug), or a command."""

    what: str
    page: str | None = None
    exercise: str | None = None
    command: str | None = None


@dataclass(frozen=True)
class Concept:
    slug: str
    title: str
    idea: tuple[str, ...]  # two to five plain sentences
    app: tuple[InApp, ...]
    lab: tuple[InLab, ...]
    tests: tuple[str, ...]  # "tests/test_file.py::test_name"


# The pages a concept may point to, with the name a link shows.
PAGES = {
    "lab.index": N_("The lab"),
    "lab.exercises": N_("The exercises"),
    "unsafe.show": N_("The unsafe checkout"),
    "shop.catalog": N_("The shop"),
    "shop.cart": N_("Your cart"),
    "redis_store.page": N_("The Redis store"),
    "mistakes.index": N_("The mistakes"),
    "reconciliation.page": N_("Reconciliation"),
}


CONCEPTS = (
    Concept(
        "idempotent",
        N_("f(f(x)) = f(x): what “idempotent” means"),
        (
            N_("An operation is idempotent when doing it twice leaves things as doing it once did: f(f(x)) = f(x)."),
            N_("Paying is not idempotent by nature: every run creates an order and a charge."),
            N_(
                "The shop makes `POST /checkout` and `POST /api/orders` idempotent per key: the first request with a "
                "key does the work, and every later request with that key gets that outcome (or waits for it) instead "
                "of doing the work again."
            ),
            N_(
                "A key counts for one customer on one endpoint only, so two customers who pick the same key get two "
                "unrelated orders."
            ),
        ),
        (
            InApp(
                "checkout/idempotency/engine.py",
                "run",
                N_("runs an operation at most once per (customer, endpoint, key)"),
            ),
            InApp("checkout/idempotency/types.py", "Scope", N_("what a key belongs to: a customer and an endpoint")),
            InApp(
                "checkout/shop/api.py",
                "create_order",
                N_("`POST /api/orders`: the key comes in the `Idempotency-Key` header"),
            ),
            InApp(
                "checkout/shop/checkout_page.py",
                "pay",
                N_("`POST /checkout`: the key comes in the form’s hidden field"),
            ),
        ),
        (
            InLab(N_("double-click Pay: one order, one charge"), exercise="double-click"),
            InLab(
                N_("one record per key; the “replays” counter counts requests answered from a stored outcome"),
                page="lab.index",
            ),
        ),
        (
            "tests/test_api_orders.py::test_replay_returns_the_stored_status_and_byte_identical_body",
            "tests/test_api_orders.py::test_the_same_key_from_two_customers_is_two_unrelated_orders",
            "tests/test_checkout_page.py::test_resubmitting_the_same_form_shows_the_same_order_with_the_replay_notice",
            "tests/test_concurrency.py::test_twenty_threads_with_one_key_make_one_order_and_one_charge",
        ),
    ),
    Concept(
        "http-methods",
        N_("Which HTTP methods are idempotent, and why POST needs a key"),
        (
            N_(
                "HTTP defines GET, HEAD, OPTIONS and TRACE as safe (they ask, and change nothing) and PUT and DELETE "
                "as idempotent (they set or remove a resource, so a repeat changes nothing more); every safe method "
                "is idempotent too."
            ),
            N_("That is why a browser, a proxy or a client may repeat them on its own after a failure."),
            N_("POST is not idempotent: each POST may create something new, so nobody may repeat it blindly."),
            N_(
                "The `Idempotency-Key` header is how a client asks for it anyway: the same key on every attempt says "
                "“this is the same request”, and the shop refuses a `POST /api/orders` without one (400)."
            ),
            N_(
                "Idempotent does not mean read-only: `GET /checkout` writes the cart version’s key the first time and "
                "reads it ever after, and removing a cart line (a POST, because HTML forms send only GET and POST) "
                "changes nothing the second time."
            ),
        ),
        (
            InApp(
                "checkout/idempotency/keys.py",
                "parse_key",
                N_("the header: 16 to 255 visible ASCII characters, quoted or not; none, or more than one, is refused"),
            ),
            InApp(
                "checkout/shop/api.py", "create_order", N_("400 `invalid-idempotency-key` before the body is even read")
            ),
            InApp(
                "checkout/shop/carts.py", "key_for", N_("`GET /checkout`: the version’s key, inserted once, then read")
            ),
            InApp(
                "checkout/shop/carts.py",
                "remove",
                N_("a removal that finds no line changes nothing, not even the version"),
            ),
        ),
        (
            InLab(N_("the same payment as a POST with no key: each submit is a new payment"), page="unsafe.show"),
            InLab(
                N_("the retry client: one `Idempotency-Key` on every attempt of its POST"),
                command='.venv/bin/python -m checkout.client --card "4000 0000 0000 0119"',
            ),
        ),
        (
            "tests/test_api_orders.py::test_missing_key_is_400_and_nothing_is_stored",
            "tests/test_keys_and_fingerprints.py::test_valid_keys_are_16_to_255_visible_ascii_and_may_be_quoted",
            "tests/test_hostile_input.py::test_more_than_one_idempotency_key_header_is_400_and_nothing_is_stored",
            "tests/test_checkout_page.py::test_reloading_checkout_renders_the_same_key_and_a_changed_cart_a_new_one",
            "tests/test_concepts.py::test_removing_a_cart_line_twice_changes_nothing_the_second_time",
        ),
    ),
    Concept(
        "at-least-once",
        N_("At-least-once delivery, exactly-once effect"),
        (
            N_(
                "A payment can arrive more than once: the shopper double-clicks, a phone retries after a timeout, a "
                "browser or a proxy resends, a client retries a 503."
            ),
            N_(
                "No network can promise exactly-once delivery, because a sender cannot tell a lost request from a "
                "lost answer, so it must send again."
            ),
            N_(
                "The shop accepts at-least-once delivery and makes the effect happen exactly once: one order and one "
                "charge per key, however many copies arrive."
            ),
            N_(
                "The client’s part is to keep its key: made once, before the first attempt, and sent with every "
                "retry; a new key per retry makes every retry a new payment."
            ),
        ),
        (
            InApp(
                "checkout/client.py",
                "place_order",
                N_("makes the key before the first attempt, then retries with the same key and the same body"),
            ),
            InApp(
                "checkout/idempotency/engine.py",
                "_claim",
                N_("one `INSERT … ON CONFLICT DO NOTHING`: of all the copies, exactly one claims the key"),
            ),
            InApp(
                "checkout/shop/models.py",
                "Order",
                N_("unique on (customer, idempotency key) and on (cart, cart version)"),
            ),
            InApp(
                "checkout/gateway/client.py",
                "Gateway.charge",
                N_("charges once per gateway key; a repeat gets the first charge"),
            ),
            InApp(
                "static/checkout.js",
                None,
                N_("disables Pay after the first click: kinder, but the server does not rely on it"),
            ),
        ),
        (
            InLab(N_("double-click Pay on the safe checkout"), exercise="double-click"),
            InLab(N_("the same double-click with no key: two orders, two charges"), exercise="unsafe"),
            InLab(
                N_("a new key per retry: a charge per retry"),
                command='.venv/bin/python -m checkout.client --card "4000 0000 0000 0259" --wrong-way',
            ),
            InLab(
                N_(
                    "1000 payments through faults and dropped answers, against a running shop: the money charged is "
                    "exact"
                ),
                command="make mass",
            ),
        ),
        (
            "tests/test_retry_client_and_mass.py::test_the_client_retries_a_503_with_the_same_key_and_is_charged_once",
            "tests/test_retry_client_and_mass.py::test_the_wrong_way_a_new_key_per_retry_charges_on_every_retry",
            "tests/test_gunicorn.py::test_100_requests_with_one_key_over_two_servers_make_one_order_and_one_charge",
            "tests/test_properties.py::test_no_sequence_of_retries_faults_crashes_refunds_and_webhooks_breaks_an_invariant",
            "tests/test_retry_client_and_mass.py::test_the_mass_test_is_exact_on_the_safe_api",
        ),
    ),
    Concept(
        "same-effect",
        N_("The same effect, not always the same response"),
        (
            N_("Idempotency promises the effect once, not the same answer every time."),
            N_(
                "A retry of a finished request gets the stored response byte for byte, with `Idempotent-Replayed: "
                "true` "
                "added; a retry that arrives while the first is still running gets 409 with `Retry-After` (the API) "
                "or waits for it and then shows the order (the browser; past its wait, a page that checks by itself)."
            ),
            N_(
                "A retry after a 503 (the gateway down, or its answer lost) gets the 201 the first attempt could not "
                "give, because a 503 is never stored as the outcome."
            ),
            N_("What happens once is the order and the charge."),
        ),
        (
            InApp(
                "checkout/shop/api.py",
                "answer",
                N_(
                    "the stored response as it was, plus `Idempotent-Replayed: true` on a replay; 409 while in "
                    "progress; "
                    "503 while the outcome is unknown"
                ),
            ),
            InApp(
                "checkout/idempotency/engine.py",
                "_answer_existing",
                N_("a completed record is replayed; a live lease is “in progress”; a free lease is taken over"),
            ),
            InApp(
                "checkout/idempotency/operation.py",
                "Operation._store",
                N_("status, headers and body, stored with the record"),
            ),
            InApp(
                "checkout/shop/checkout_page.py",
                "_answer",
                N_("the browser: a 303 to the same order, whose page says it was already placed and charged once"),
            ),
        ),
        (
            InLab(N_("a 503 first, then the paid order; one charge"), exercise="lost-answer"),
            InLab(N_("the second tab waits, then shows the same order"), exercise="racing-tabs"),
            InLab(N_("a key’s timeline shows `replayed`, `conflict` and `resumed`"), page="lab.index"),
        ),
        (
            "tests/test_api_orders.py::test_replay_returns_the_stored_status_and_byte_identical_body",
            "tests/test_api_orders.py::test_same_key_still_in_progress_is_409_with_retry_after",
            "tests/test_failures.py::test_gateway_unavailable_is_503_nothing_stored_and_the_retry_resumes",
            "tests/test_api_orders.py::test_a_declined_card_is_402_stored_and_replayed",
            "tests/test_concurrency.py::"
            "test_a_second_submit_that_outwaits_its_bound_gets_a_self_checking_page_that_ends_on_the_order",
        ),
    ),
    Concept(
        "set-versus-increment",
        N_("Set versus increment: the cart and the payment"),
        (
            N_(
                "“Add to cart” in this shop is an increment: pressing it twice adds two, because each press adds its "
                "quantity to the line."
            ),
            N_(
                "“Pay for cart version N” is a set: however often Pay is pressed, version N is paid once, because the "
                "version’s key is made once and orders are unique on (cart, version)."
            ),
            N_(
                "The shop accepts the increment for the cart because its result is visible (the cart badge, the cart "
                "page and the checkout all show the quantity before anything is paid) and reversible (Remove)."
            ),
            N_(
                "A charge is neither: it moves money at once, and only a refund takes it back, so paying must be a set."
            ),
        ),
        (
            InApp(
                "checkout/shop/carts.py",
                "add",
                N_(
                    "the increment: `ON CONFLICT DO UPDATE` adds the quantity to the line (at most 99), and the cart "
                    "moves to a new version"
                ),
            ),
            InApp(
                "checkout/shop/carts.py", "remove", N_("the undo, whatever the number of presses: the line is deleted")
            ),
            InApp("checkout/shop/carts.py", "key_for", N_("one key per cart version, made once in the database")),
            InApp("checkout/shop/models.py", "Order", N_("unique on (cart_id, cart_version): one order per version")),
            InApp(
                "checkout/shop/placement.py",
                "PlaceOrder._lines",
                N_(
                    "pays for the version the form showed at the total it showed; a cart changed since is “out of "
                    "date” "
                    "and nothing is charged"
                ),
            ),
        ),
        (
            InLab(N_("press “Add to cart” twice, and the cart badge says 2"), page="shop.catalog"),
            InLab(N_("the quantity, and Remove"), page="shop.cart"),
            InLab(N_("two tabs, one cart version, one key: one order"), exercise="racing-tabs"),
        ),
        (
            "tests/test_concepts.py::test_pressing_add_to_cart_twice_adds_two",
            "tests/test_one_payment_per_cart.py::test_two_different_keys_for_one_cart_version_end_in_one_order",
            "tests/test_one_payment_per_cart.py::"
            "test_two_tabs_opened_at_the_same_moment_render_the_same_key_and_paying_in_both_charges_once",
            "tests/test_checkout_page.py::test_a_form_for_a_cart_that_changed_gets_the_out_of_date_page",
        ),
    ),
    Concept(
        "key-lifetime",
        N_("How long a key lives"),
        (
            N_(
                "A completed key is replayed for `CHECKOUT_KEY_LIFETIME_SECONDS` (24 hours by default); after that, "
                "`flask --app checkout idempotency purge` may delete its record and its audit events."
            ),
            N_(
                "A long lifetime costs storage: every record keeps its stored response, and every step its audit "
                "event, until the purge."
            ),
            N_(
                "A short one costs precision: once the record is gone, so are the stored response and the fingerprint, "
                "and the shop can no longer tell a late retry from a key reused for another request."
            ),
            N_(
                "It still never charges twice: the orders’ own unique constraint on (customer, idempotency key) finds "
                "the order the key placed, and the late request gets that order, even with a different body."
            ),
            N_("A record still in progress is never purged; reconcile finishes it first."),
        ),
        (
            InApp("checkout/config.py", "SETTINGS", N_("`CHECKOUT_KEY_LIFETIME_SECONDS`, 86400 by default")),
            InApp(
                "checkout/idempotency/engine.py", "_claim", N_("sets the record’s `expires_at` when it claims the key")
            ),
            InApp(
                "checkout/idempotency/engine.py",
                "purge",
                N_("deletes completed records past `expires_at`, with their events; never one in progress"),
            ),
            InApp("checkout/cli.py", "register_commands", N_("`flask --app checkout idempotency purge`")),
            InApp(
                "checkout/shop/placement.py",
                "PlaceOrder.create_order",
                N_("when an order’s unique constraint finds the order already placed, answers with that order"),
            ),
            InApp("checkout/shop/models.py", "Order", N_("unique on (customer_id, idempotency_key), with no expiry")),
        ),
        (
            InLab(
                N_("run it from cron; the lab’s records table no longer lists the purged keys"),
                command=".venv/bin/flask --app checkout idempotency purge",
            ),
            InLab(N_("the records table: when each key was made, and the status it stored"), page="lab.index"),
        ),
        (
            "tests/test_configuration_and_commands.py::test_purge_removes_expired_completed_records_only",
            "tests/test_configuration_and_commands.py::test_a_retry_after_the_purge_gets_the_existing_order_not_a_second_one",
            "tests/test_growth.py::test_purge_removes_the_audit_events_of_the_records_it_purges",
            "tests/test_concepts.py::test_after_the_purge_a_changed_body_under_the_old_key_gets_the_old_order",
        ),
    ),
    Concept(
        "storage",
        N_("Where the records live, and what each choice costs"),
        (
            N_(
                "Here the idempotency record lives in the same database as the order, and the claim of the key and "
                "the creation of the order commit in one transaction: both exist, or neither does."
            ),
            N_(
                "Redis would be fast and would expire keys by itself (a TTL instead of a purge), but it sits outside "
                "the order’s transaction, so a crash between the two writes leaves a key without its order or an "
                "order without its key, and the code must recover from both."
            ),
            N_(
                "One worker’s memory is wrong as soon as there are several workers or servers: a retry lands on a "
                "process that has never seen the key, and pays again."
            ),
            N_(
                "The lab has both beside this one: a Redis store of the same records, whose losses the orders’ own "
                "unique constraint survives, and the memory-store mistake, which pays once per worker."
            ),
        ),
        (
            InApp(
                "checkout/idempotency/engine.py",
                "_claim",
                N_("the record’s INSERT and the first phase (the order) in one `writing()` unit of work"),
            ),
            InApp(
                "checkout/idempotency/models.py",
                "IdempotencyRecord",
                N_("unique on (customer, endpoint, key), in the shop’s database"),
            ),
            InApp(
                "checkout/transactions.py",
                "writing",
                N_("the one way anything is written: one transaction, committed whole"),
            ),
            InApp(
                "checkout/limits.py",
                "register_rate_limits",
                N_(
                    "where the shop does use Redis (`CHECKOUT_REDIS_URL`): rate-limit counters; without it each worker "
                    "counts on its own, which a limit can afford"
                ),
            ),
            InApp(
                "checkout/lab/redis_store.py",
                "RedisStore",
                N_("the same records in Redis: a claim is `SET NX` with an expiry, outside the order’s transaction"),
            ),
            InApp(
                "checkout/lab/mistakes/memory_store.py",
                None,
                N_("the mistake: keys in one worker’s memory, so each worker pays once"),
            ),
            InApp(
                "checkout/idempotency/engine.py",
                "_waiting_slot",
                N_("one worker’s memory, on purpose: it only bounds how many duplicates wait, and decides nothing"),
            ),
            InApp(
                "checkout/gateway/models.py",
                "GatewayFaultMark",
                N_(
                    "the mock gateway’s “failed once” mark is in the database, because a retry may land on another "
                    "worker"
                ),
            ),
        ),
        (
            InLab(N_("records, orders and charges, read from one database"), page="lab.index"),
            InLab(
                N_("several workers (`make serve`) share one database, so reconcile finishes what a dead worker left"),
                exercise="killed-worker",
            ),
            InLab(
                N_("the same records in Redis: forget them mid-run, and the damage still reads $0.00"),
                page="redis_store.page",
            ),
            InLab(N_("the memory-store mistake: one order per worker that answers"), page="mistakes.index"),
        ),
        (
            "tests/test_failures.py::test_a_crash_inside_the_claims_transaction_leaves_no_record_and_no_order",
            "tests/test_gunicorn.py::test_100_requests_with_one_key_over_two_servers_make_one_order_and_one_charge",
            "tests/test_gunicorn.py::test_two_browser_submits_of_one_form_on_different_workers_charge_once",
            "tests/test_waiting_and_rate_limits.py::test_past_a_few_waiters_a_duplicate_gets_the_still_processing_page_at_once",
        ),
    ),
    Concept(
        "422-and-the-header-name",
        N_("422 for a reused key, and the name of the replay header"),
        (
            N_(
                "A key sent again with a different body is a client bug: the request can never succeed as sent, and "
                "retrying it unchanged is pointless, so this shop answers 422 (`idempotency-key-reused`) and leaves "
                "the stored outcome untouched."
            ),
            N_(
                "Some articles answer 409 there; this shop keeps 409 for “in progress, retry later”, which a client "
                "should retry, and its own retry client retries 409 and no other 4xx."
            ),
            N_(
                "The IETF draft “The Idempotency-Key HTTP Header Field” also suggests 422 for a key reused with a "
                "different payload, and 409 for a request still being processed."
            ),
            N_(
                "A replay carries `Idempotent-Replayed: true`; one article writes `Idempotency-Replayed`, but this "
                "shop sends only `Idempotent-Replayed`, and a client should read the name the shop documents rather "
                "than guess."
            ),
        ),
        (
            InApp(
                "checkout/shop/api.py",
                "answer",
                N_(
                    "a mismatch is 422 `idempotency-key-reused`; in progress is 409 with `Retry-After`; a replay gets "
                    "`Idempotent-Replayed: true`"
                ),
            ),
            InApp(
                "checkout/idempotency/engine.py",
                "_answer_existing",
                N_("compares the fingerprint first: a mismatch is never replayed and never run"),
            ),
            InApp(
                "checkout/client.py", "RETRYABLE", N_("409, 502, 503 and 504: what the client retries; a 422 is final")
            ),
            InApp(
                "checkout/shop/checkout_page.py",
                "_answer",
                N_("the browser’s 422: “already started with other details”"),
            ),
        ),
        (InLab(N_("the “mismatches” and “conflicts” counters, and `mismatch` in a key’s timeline"), page="lab.index"),),
        (
            "tests/test_api_orders.py::test_same_key_different_payload_is_422_and_leaves_the_record_untouched",
            "tests/test_api_orders.py::test_same_key_still_in_progress_is_409_with_retry_after",
            "tests/test_retry_client_and_mass.py::test_the_client_never_retries_a_4xx_other_than_409",
            "tests/test_retry_client_and_mass.py::test_the_client_honours_retry_after_on_409",
            "tests/test_api_orders.py::test_replay_returns_the_stored_status_and_byte_identical_body",
        ),
    ),
    Concept(
        "fingerprint",
        N_("The fingerprint of a request"),
        (
            N_(
                "A key alone cannot tell a retry from a mistake, so the shop stores with each key a fingerprint of the "
                "request: an HMAC-SHA256 of the method, the endpoint and the normalized body."
            ),
            N_(
                "Normalized means parsed and written one way (object keys sorted, the card as digits only, the email "
                "as the validator writes it), so the same request written differently matches and a changed value "
                "does not."
            ),
            N_(
                "The body covers a card number, so the HMAC is keyed by its own secret, `CHECKOUT_FINGERPRINT_SECRET` "
                "and not `SECRET_KEY`: without it nobody can test guesses of a card number against a stored "
                "fingerprint."
            ),
            N_(
                "Every server must share that secret, or a retry that reaches another server looks like a different "
                "request."
            ),
            N_("The browser’s fingerprint covers the email, the card and the cart version the form was shown for."),
        ),
        (
            InApp("checkout/idempotency/fingerprint.py", "fingerprint", N_("HMAC-SHA256 of the canonical JSON")),
            InApp(
                "checkout/shop/api.py",
                "api_fingerprint",
                N_("the API’s, from the parsed body, before the catalog is read"),
            ),
            InApp("checkout/shop/validation.py", "ParsedOrder.normalized", N_("what the API’s fingerprint covers")),
            InApp("checkout/shop/checkout_page.py", "pay", N_("the browser’s: email, card digits, cart version")),
            InApp("checkout/shop/runtime.py", "fingerprint_secret", N_("its own secret, not `SECRET_KEY`")),
            InApp(
                "checkout/idempotency/engine.py",
                "_same_fingerprint",
                N_("compared in constant time (`hmac.compare_digest`)"),
            ),
        ),
        (InLab(N_("the “mismatches” counter; a key’s timeline shows `mismatch`"), page="lab.index"),),
        (
            "tests/test_keys_and_fingerprints.py::test_the_fingerprint_ignores_key_order_but_not_values",
            "tests/test_keys_and_fingerprints.py::test_the_fingerprint_depends_on_the_secret_and_hides_the_card",
            "tests/test_card_data.py::test_the_fingerprint_is_keyed_by_its_own_secret_not_the_session_secret",
            "tests/test_invariants.py::test_no_full_card_number_is_stored_or_logged",
        ),
    ),
    Concept(
        "leases-and-fencing",
        N_("Leases, recovery points and fencing"),
        (
            N_(
                "While a payment runs, its record carries a lease: an owner token, the worker’s name and an expiry "
                "(`CHECKOUT_LEASE_SECONDS`)."
            ),
            N_(
                "Every phase ends with an UPDATE that matches only while the owner token is still on the record, so a "
                "worker that lost its lease (it stalled, and another took over) writes nothing: its whole transaction "
                "rolls back."
            ),
            N_(
                "The recovery point says where to resume (`order_created` once the order exists, `finished` once the "
                "answer is stored); a retry that takes over an expired or released lease, with a compare-and-set, "
                "continues from there and asks the gateway again with the same gateway key, which cannot charge twice."
            ),
            N_(
                "Reconcile, for clients that never come back, first voids (fences) the order’s gateway key: the "
                "gateway keeps whichever came first, a charge or the void, so “not charged” is decided only when no "
                "charge can land any more."
            ),
        ),
        (
            InApp(
                "checkout/idempotency/operation.py",
                "Operation.owned",
                N_("one unit of work that ends with the owner-checked UPDATE"),
            ),
            InApp(
                "checkout/idempotency/operation.py",
                "Operation.apply",
                N_("moves the recovery point, or stores the answer"),
            ),
            InApp(
                "checkout/idempotency/engine.py", "take_over", N_("the compare-and-set on an expired or released lease")
            ),
            InApp(
                "checkout/idempotency/engine.py", "abandoned", N_("what reconcile finds: records nobody is working on")
            ),
            InApp("checkout/shop/placement.py", "PlaceOrder.phases", N_("`started` → `order_created` → `finished`")),
            InApp(
                "checkout/shop/reconcile.py", "reconcile_one", N_("takes over, fences the gateway key, then decides")
            ),
            InApp(
                "checkout/gateway/client.py",
                "Gateway.void",
                N_("the fence: a void and a charge race for one unique key"),
            ),
        ),
        (
            InLab(N_("kill a worker mid-payment, then reconcile"), exercise="killed-worker"),
            InLab(N_("the lease is released at once, so the retry resumes"), exercise="gateway-down"),
            InLab(N_("the retry asks the gateway again and finds the charge"), exercise="lost-answer"),
            InLab(N_("the records table: state, recovery point and lease"), page="lab.index"),
            InLab(
                N_("finish abandoned payments by asking the gateway"),
                command=".venv/bin/flask --app checkout idempotency reconcile",
            ),
        ),
        (
            "tests/test_failures.py::test_a_worker_whose_lease_was_taken_over_cannot_write",
            "tests/test_failures.py::test_of_many_retries_racing_for_an_expired_lease_exactly_one_takes_it_over",
            "tests/test_failures.py::test_a_retry_after_the_lease_expires_takes_over_and_finishes",
            "tests/test_fencing.py::test_reconcile_fences_the_gateway_key_so_a_late_charge_under_it_is_refused",
            "tests/test_fencing.py::"
            "test_a_worker_stopped_inside_the_gateway_call_never_leaves_a_failed_order_beside_a_charge",
            "tests/test_gunicorn.py::test_a_worker_killed_mid_payment_is_resumed_by_the_retry",
        ),
    ),
)
