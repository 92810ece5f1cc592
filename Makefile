# Two commands a newcomer needs: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The demo needs only the package's own dependencies; the test extra (peers, servers,
# notebooks, linters) comes on top in the same environment when `make test` first runs.
STAMP_CORE := $(VENV)/.installed-core

.PHONY: demo test test-min bench fuzz lint env clean

$(STAMP_CORE): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e .
	touch $(STAMP_CORE)

$(STAMP): $(STAMP_CORE)
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

env: $(STAMP)

demo: $(STAMP_CORE)
	$(PY) -m rumi_xarray demo --out demo-data

# The suite without its slow cases (`make bench` runs those), then the dask-facing tests
# again under dask's array query planning, announced to become dask's default.
test: $(STAMP)
	$(PY) -m pytest -q -m "not slow"
	DASK_ARRAY__QUERY_PLANNING=True $(PY) -m pytest -q -m "dask and not slow" \
		tests/test_dask.py tests/test_distributed.py

bench: $(STAMP)
	$(PY) -m pytest -q -m slow
	$(PY) benchmarks/open_speed.py
	$(PY) benchmarks/run.py
	$(PY) benchmarks/cluster.py
	$(PY) benchmarks/sparse_reads.py
	$(PY) benchmarks/stac.py
	$(PY) benchmarks/verify_cost.py
	$(PY) benchmarks/write_speed.py
	$(PY) benchmarks/remote_open.py

# The hostile-input property test with many more examples than `make test` runs.
fuzz: $(STAMP)
	RUMI_FUZZ_EXAMPLES=2000 $(PY) -m pytest -q \
		tests/test_hardening.py::test_hostile_inputs_never_crash_or_hang

# ruff, then mypy with the settings of [tool.mypy] in pyproject.toml.
lint: $(STAMP)
	$(VENV)/bin/ruff check rumi_xarray tests benchmarks notebooks tools
	$(VENV)/bin/mypy rumi_xarray

# The suite against the oldest versions pyproject.toml declares (every `>=` floor of the
# core dependencies and of the test extra, pinned by tools/min_constraints.py), in its
# own venv so .venv keeps current releases. CI runs `make test` only: run this when a
# dependency, a floor or a use of a newer library API changes (about 6 minutes from
# scratch on 2 cores: 1.5 to install, 4.5 to test; too long to add to CI's `make test`).
VENV_MIN := .venv-min
STAMP_MIN := $(VENV_MIN)/.installed

$(STAMP_MIN): pyproject.toml tools/min_constraints.py
	rm -rf $(VENV_MIN)
	$(PYTHON) -m venv $(VENV_MIN)
	$(VENV_MIN)/bin/python -m pip install --quiet --upgrade pip
	$(PYTHON) tools/min_constraints.py pyproject.toml > $(VENV_MIN)/constraints.txt
	$(VENV_MIN)/bin/python -m pip install --quiet -c $(VENV_MIN)/constraints.txt -e '.[test]'
	touch $(STAMP_MIN)

# The same runs as `make test`, less the lint test: ruff's and mypy's floors are not the
# versions the lint configuration is written for (`make lint` and `make test` use current
# ones).
test-min: $(STAMP_MIN)
	$(VENV_MIN)/bin/python -m pip list --format=freeze > $(VENV_MIN)/installed.txt
	$(VENV_MIN)/bin/python -m pytest -q -p no:cacheprovider -m "not slow" \
		--deselect tests/test_architecture.py::test_make_lint_passes
	DASK_ARRAY__QUERY_PLANNING=True $(VENV_MIN)/bin/python -m pytest -q -p no:cacheprovider \
		-m "dask and not slow" tests/test_dask.py tests/test_distributed.py

clean:
	rm -rf $(VENV) $(VENV_MIN) build demo-data bench-data
