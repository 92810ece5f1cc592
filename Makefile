# Two commands a newcomer needs: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test bench fuzz lint env clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

env: $(STAMP)

demo: $(STAMP)
	$(PY) -m rumi_xarray demo --out demo-data

test: $(STAMP)
	$(PY) -m pytest -q

bench: $(STAMP)
	$(PY) benchmarks/open_speed.py
	$(PY) benchmarks/run.py
	$(PY) benchmarks/verify_cost.py

fuzz: $(STAMP)
	RUMI_FUZZ_EXAMPLES=2000 $(PY) -m pytest -q tests/test_hostile_input.py

lint: $(STAMP)
	$(VENV)/bin/ruff check rumi_xarray tests benchmarks notebooks

clean:
	rm -rf $(VENV) build demo-data bench-data
