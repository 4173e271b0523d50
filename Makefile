# `make demo` and `make test` each do all the set-up on a fresh machine.
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
PIP     = $(PY) -m pip install --quiet --disable-pip-version-check

.PHONY: demo demo-serve test test-fast lint bench bench-quick clean browser-deps

$(PY):
	$(PYTHON) -m venv $(VENV)

demo: $(PY)
	$(PIP) -e ".[data]"
	$(VENV)/bin/ldpkit demo

test: $(PY) browser-deps
	$(PIP) -e ".[data,test,distributed,service]"
	$(PY) -m pytest -n 2 src tests

# The quick loop while developing: tests marked `slow` (heavy statistics, reproductions) are left out.
test-fast: $(PY)
	$(PIP) -e ".[data,test,distributed,service]"
	$(PY) -m pytest -n 2 -m "not slow" src tests

lint: $(PY)
	$(PIP) -e ".[data,test,distributed,service]"
	$(VENV)/bin/ruff check src tests benchmarks studies examples
	$(VENV)/bin/ruff format --check src tests benchmarks studies examples
	$(VENV)/bin/mypy src

# The live collector with simulated devices; prints the dashboard URL (Ctrl-C stops).
demo-serve: $(PY)
	$(PIP) -e ".[data,service]"
	$(VENV)/bin/ldpkit demo --serve

# playwright-core (pinned by tests/browser/package-lock.json) for the dashboard's browser
# test; it drives the system's /usr/bin/chromium and downloads no browser.
browser-deps:
	@if command -v npm >/dev/null 2>&1; then \
		npm ci --prefix tests/browser --no-audit --no-fund --loglevel=error; \
	else echo "npm not found: tests/test_dashboard_browser.py will skip (CI installs npm)"; fi

# The product benchmarks (benchmarks/run.py), each against its baseline in the same run;
# bench-quick is the smoke run at small sizes. Research probes live in studies/.
bench: $(PY)
	$(PIP) -e ".[data,service,distributed,bench]"
	$(PY) benchmarks/run.py

bench-quick: $(PY)
	$(PIP) -e ".[data,service,distributed,bench]"
	$(PY) benchmarks/run.py --quick
	@# house rule: a quick run never rewrites the published results under docs/results
	@if git rev-parse --git-dir >/dev/null 2>&1 && [ -n "$$(git status --porcelain -- docs/results)" ]; then \
		git status --porcelain -- docs/results; echo "bench-quick changed docs/results"; exit 1; fi

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info .pytest_cache results tests/browser/node_modules
