# The two commands a newcomer needs: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
FLASK := $(BIN)/flask --app checkout
HOST ?= 127.0.0.1
PORT ?= 5000

.PHONY: install run serve test lint bench migrate seed browser screenshots mass clean mutants

$(BIN)/activate:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/activate
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

install: $(VENV)/.installed

migrate: install
	$(FLASK) db upgrade

seed: migrate
	$(FLASK) seed

## Serve the shop on http://127.0.0.1:5000 with SQLite (the instance folder).
run: seed
	$(FLASK) run --host $(HOST) --port $(PORT)

## The same with gunicorn and several workers (see gunicorn.conf.py).
serve: seed
	$(BIN)/gunicorn --config gunicorn.conf.py 'checkout:create_app()'

## Chromium for the browser tests: Debian's, else Playwright's own.
browser:
	@scripts/ensure-browser

## The whole suite, browser tests included.
test: install browser
	$(BIN)/python -m pytest $(PYTEST_ARGS)

## The mutation check: each layer of the defence turned off in a copy of the tree; its tests must fail.
mutants: install browser
	$(BIN)/python scripts/mutants.py $(MUTANTS_ARGS)

## Lint and format check (ruff).
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

## PNGs of the catalog, checkout, a replayed order, the unsafe path and the lab, into docs/.
screenshots: install browser
	@fc-list 2>/dev/null | grep -qi emoji || { command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ] && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fonts-noto-color-emoji >/dev/null; } || true
	$(BIN)/python scripts/screenshots.py

## What the protection costs: protected vs unsafe vs replay, 1M records, the storm (SQLite, then PostgreSQL).
bench: install
	$(BIN)/python scripts/bench.py $(BENCH_ARGS)

## 1000 payments through injected faults against a running shop (make run first); MASS_ARGS=--unsafe
mass: install
	$(BIN)/python -m checkout.lab.mass --url http://$(HOST):$(PORT) $(MASS_ARGS)

clean:
	rm -rf $(VENV) instance .pytest_cache
