# `make demo` and `make test` each do all the set-up on a fresh machine.
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
PIP     = $(PY) -m pip install --quiet --disable-pip-version-check

.PHONY: demo test test-fast lint bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)

demo: $(PY)
	$(PIP) -e ".[data]"
	$(VENV)/bin/ldpkit demo

test: $(PY)
	$(PIP) -e ".[data,test,distributed,service]"
	$(PY) -m pytest -n 2 src tests

# The quick loop while developing: tests marked `slow` (heavy statistics, reproductions) are left out.
test-fast: $(PY)
	$(PIP) -e ".[data,test,distributed,service]"
	$(PY) -m pytest -n 2 -m "not slow" src tests

lint: $(PY)
	$(PIP) -e ".[data,test,distributed,service]"
	$(VENV)/bin/ruff check src tests benchmarks examples
	$(VENV)/bin/ruff format --check src tests benchmarks examples
	$(VENV)/bin/mypy src

bench: $(PY)
	$(PIP) -e ".[data]"
	$(PY) benchmarks/frequency.py

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info .pytest_cache results
