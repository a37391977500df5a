# The two commands a newcomer needs: `make run` and `make test`. `make help` lists the rest.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
FLASK := $(BIN)/flask --app checkout
HOST ?= 127.0.0.1
PORT ?= 5000
# The shop's own address: where the lab's forms and the webhook relay send their requests (never a Host header).
CHECKOUT_SHOP_URL ?= http://$(HOST):$(PORT)
INSTANCE ?= $(or $(CHECKOUT_INSTANCE_PATH),instance)
TRANSLATIONS := checkout/translations

.DEFAULT_GOAL := help
.PHONY: help install run serve proxy test check qa lint fuzz translations bench mutants migrate seed reset-lab browser screenshots mass clean

## List the targets.
help:
	@awk '/^## /{doc=substr($$0,4); next} /^[a-z][a-z-]*:/{if (doc) {split($$0,t,":"); printf "  make %-12s %s\n", t[1], doc}; doc=""}' $(MAKEFILE_LIST)

$(BIN)/activate:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/activate
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

## Create the virtual environment and install the shop with its tools (and compile the translations).
install: $(VENV)/.installed
	$(BIN)/pybabel -q compile -d $(TRANSLATIONS)

## Extract every marked string into messages.pot, merge it into the Ukrainian and Russian catalogs, compile them.
translations: $(VENV)/.installed
	$(BIN)/pybabel -q extract -F babel.cfg -k _l -k N_ -c TRANSLATORS: --add-location=file --no-wrap --sort-by-file \
		--project=Checkout --copyright-holder="The Checkout maintainers" -o $(TRANSLATIONS)/messages.pot checkout templates
	$(BIN)/pybabel -q update --no-wrap --no-fuzzy-matching --ignore-obsolete -i $(TRANSLATIONS)/messages.pot -d $(TRANSLATIONS)
	$(BIN)/pybabel -q compile -d $(TRANSLATIONS)  # so the app serves what the catalogs now say

## Bring the database schema up to date (migrations/).
migrate: install
	$(FLASK) db upgrade

## Products and the demo customers (safe to run twice).
seed: migrate
	$(FLASK) seed

# make run and make serve start a Procfile's processes with honcho, in one terminal (Ctrl-C stops all):
# the web server, the outbox relay, the webhook relay, the events' publisher and the loyalty consumer, each its
# own process. The Procfile names commands as an activated venv would; honcho gives web PORT.
# CHECKOUT_OUTBOX_RELAY=off (exercise 9) or CHECKOUT_LOYALTY_CONSUMER=off (exercise 17): that one is left out,
# you run it by hand.
is_off = $(filter off false no 0,$(shell printf '%s' '$(1)' | tr -d '[:space:]' | tr '[:upper:]' '[:lower:]'))
OUTBOX_RELAY_OFF := $(call is_off,$(CHECKOUT_OUTBOX_RELAY))
LOYALTY_CONSUMER_OFF := $(call is_off,$(CHECKOUT_LOYALTY_CONSUMER))
PROCESSES := $(strip web $(if $(OUTBOX_RELAY_OFF),,outbox) webhooks events $(if $(LOYALTY_CONSUMER_OFF),,loyalty))
HONCHO := PATH="$(abspath $(BIN)):$$PATH" PYTHONUNBUFFERED=1 HOST=$(HOST) CHECKOUT_SHOP_URL=$(CHECKOUT_SHOP_URL) $(BIN)/honcho

## Serve the shop on http://127.0.0.1:5000 with SQLite, its relays and its consumer (Procfile; HOST=..., PORT=... to change).
run: seed
	$(HONCHO) start -f Procfile --port $(PORT) $(PROCESSES)

## Serve it with gunicorn, 4 workers x 4 threads, on the same HOST and PORT, and the relays (exercise 5 needs this).
serve: seed
	$(HONCHO) start -f Procfile.serve --port $(PORT) $(PROCESSES)

## Serve it behind nginx on HOST:PORT: two gunicorn servers on the next two ports, one database, the relays (exercise 14).
proxy: seed
	CHECKOUT_SHOP_URL=$(CHECKOUT_SHOP_URL) $(BIN)/python -m checkout.lab.proxy --listen $(HOST):$(PORT) --prefix "$(abspath $(INSTANCE))/proxy"
	$(HONCHO) start -f Procfile.proxy -e "$(abspath $(INSTANCE))/proxy/proxy.env" nginx app-1 app-2 $(filter-out web,$(PROCESSES))

## Start a fresh workshop: an empty development database and mailbox, migrated and seeded (secrets kept; stop the shop first).
reset-lab: install
	$(BIN)/python scripts/reset_lab.py $(INSTANCE)/checkout.sqlite3
	$(FLASK) db upgrade
	$(FLASK) seed

## Chromium for the browser tests: Debian's, else Playwright's own.
browser:
	@scripts/ensure-browser

# Tests run in TEST_WORKERS processes (pytest-xdist), each taking the next test when it is free (worksteal): more
# processes than cores, since many tests wait on a server or a browser. At most 4: one Redis database each (12-15).
TEST_WORKERS ?= 4
PYTEST := $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist worksteal

# The TypeScript QA tests' one dependency (qa/ts, run by the suite); without npm they are skipped.
QA_TS := qa/ts
$(QA_TS)/node_modules/.package-lock.json: $(QA_TS)/package-lock.json
	@if command -v npm >/dev/null 2>&1; then cd $(QA_TS) && npm ci --no-audit --no-fund --silent; \
	else echo "no npm here: the TypeScript QA tests are skipped (Debian or Ubuntu: apt-get install nodejs npm)"; fi

## The whole suite, browser tests included (TEST_DATABASE_URL=postgresql+psycopg://... for PostgreSQL).
test: install browser $(QA_TS)/node_modules/.package-lock.json
	$(PYTEST) $(PYTEST_ARGS)

## The tests that run in process (no server, no browser): about a minute, for the edit-run loop.
check: install
	$(PYTEST) -m "not browser and not server" $(PYTEST_ARGS)

# The shop the QA tests drive: QA_URL, else make run's address.
QA_URL ?= $(CHECKOUT_SHOP_URL)

## The double-click tests of qa/ against a running shop (QA_URL=...), in Python, then TypeScript.
qa: install browser $(QA_TS)/node_modules/.package-lock.json
	cd qa && CHROMIUM_PATH=$${CHROMIUM_PATH:-$$(command -v chromium-headless-shell || command -v chromium || true)} $(abspath $(BIN))/python -m pytest --base-url $(QA_URL) -p no:cacheprovider
	@if command -v npx >/dev/null 2>&1; then cd $(QA_TS) && BASE_URL=$(QA_URL) CHROMIUM_PATH=$${CHROMIUM_PATH:-$$(command -v chromium-headless-shell || command -v chromium || true)} npx playwright test; fi

## The mutation check: each layer of the defence turned off in a copy of the tree; its tests must fail.
mutants: install browser
	$(BIN)/python scripts/mutants.py $(MUTANTS_ARGS)

## schemathesis against a live shop: every answer conforms to /api/openapi.json, no 5xx.
fuzz: install
	$(BIN)/python scripts/fuzz_api.py $(FUZZ_ARGS)

## Lint, format check and types: ruff, then mypy --strict on checkout/ (settings in pyproject.toml).
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

## What the protection costs: protected vs unsafe vs replay, 1M records, the storm (SQLite, then PostgreSQL).
bench: install
	$(BIN)/python scripts/bench.py $(BENCH_ARGS)

## PNGs of the shop and the lab into docs/ (needs Chromium: make browser).
screenshots: install
	$(BIN)/python scripts/screenshots.py

## 1000 payments through injected faults against a running shop (make run first); MASS_ARGS=--unsafe
mass: install
	$(BIN)/python -m checkout.lab.mass --url $(CHECKOUT_SHOP_URL) $(MASS_ARGS)

## Remove the virtual environment and the development instance folder (database and secrets).
clean:
	rm -rf $(VENV) .qa-venv $(INSTANCE) .pytest_cache $(QA_TS)/node_modules
