# Two commands a newcomer needs: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The demo needs only the package's own dependencies; the test extra (peers, servers,
# notebooks, linters) comes on top in the same environment when `make test` first runs.
STAMP_CORE := $(VENV)/.installed-core
# Every install takes its versions from the lock (`make lock` writes it from pyproject.toml):
# one candidate per package, so pip's resolver has nothing to search (without it, it
# backtracked through the aiobotocore/botocore/boto3/moto pins for minutes). Not quiet:
# pip prints each package it collects and its download progress. --no-compile: byte-compiling
# every module of ~200 packages at install cost more CPU than the rest of the install (67 s
# against 29 s of CPU for the test environment, issue 25); Python compiles what is imported.
LOCK := requirements/lock.txt
PIP_INSTALL := $(PY) -m pip install --progress-bar on --no-compile -c $(LOCK)

.PHONY: demo test test-min bench fuzz lint env clean lock docs dist

# Bytecode, written once: a Python told not to write it (PYTHONDONTWRITEBYTECODE, set on
# this project's CI machines) compiles xarray, pandas and dask from source in every
# process: each test worker, each program a test starts, each notebook kernel and dask
# worker (5.3 s to import the reading stack instead of 1.9 s). Every command here lets
# Python write it, under $(VENV)/pycache so the source tree stays clean; pip still
# installs with --no-compile below, so only what is imported is compiled, once.
export PYTHONDONTWRITEBYTECODE :=
export PYTHONPYCACHEPREFIX := $(CURDIR)/$(VENV)/pycache

$(STAMP_CORE): pyproject.toml $(LOCK)
	@echo "==> [setup 1/3] creating the virtual environment $(VENV) with $(PYTHON)"
	$(PYTHON) -m venv $(VENV)
	@echo "==> [setup 2/3] upgrading pip in $(VENV)"
	$(PY) -m pip install --progress-bar on --upgrade pip
	@echo "==> [setup 3/3] installing rumi-xarray and its dependencies, versions from $(LOCK)"
	$(PIP_INSTALL) -e .
	touch $(STAMP_CORE)

$(STAMP): $(STAMP_CORE)
	@echo "==> [setup] installing the test extra (peers, servers, notebooks, docs tools, linters), versions from $(LOCK)"
	$(PIP_INSTALL) -e '.[test]'
	touch $(STAMP)

# The docs extra alone (Sphinx and the notebooks' libraries), when `make test` has not run.
STAMP_DOCS := $(VENV)/.installed-docs
$(STAMP_DOCS): $(STAMP_CORE)
	@echo "==> [setup] installing the docs extra (Sphinx, pydata theme, numpydoc, myst-nb), versions from $(LOCK)"
	$(PIP_INSTALL) -e '.[docs]'
	touch $(STAMP_DOCS)

# The documentation site in docs/_build/html, warnings as errors (-W) and every reference
# checked (-n). The notebooks are rendered from `make test`'s executed copies when those are
# current, else executed here (about 1.5 minutes more on 2 cores). Then the built pages are
# checked for every figure, thumbnail, plot and public name; DOCS_SCREENSHOTS=dir also
# renders them in headless Chromium and checks the figures show (what .ci/run does).
DOCS_HTML := docs/_build/html
docs: $(STAMP_DOCS)
	@echo "==> [docs 1/2] building the site into $(DOCS_HTML) with Sphinx"
	$(PY) -m sphinx -W --keep-going -n -b html docs $(DOCS_HTML)
	@echo "==> [docs 2/2] checking the built pages"
	$(PY) tools/check_docs.py $(if $(DOCS_SCREENSHOTS),--screenshots $(DOCS_SCREENSHOTS)) $(DOCS_HTML)

# The release files in dist/: the sdist and the wheel, built in an isolated environment as
# pip would build them, then checked as PyPI checks them (metadata, the README renders).
dist: $(STAMP)
	@echo "==> [dist 1/2] building the sdist and the wheel into dist/"
	rm -rf dist
	$(PY) -m build --outdir dist .
	@echo "==> [dist 2/2] checking them with twine"
	$(PY) -m twine check --strict dist/*

# Rewrite the lock after a change of pyproject.toml's requirements (or requirements/pins.in)
# with uv, in a venv of its own; tests/test_lock.py fails while the lock is stale.
VENV_LOCK := .venv-lock
UV_VERSION := 0.13.8
lock:
	@echo "==> [lock 1/2] uv $(UV_VERSION) in $(VENV_LOCK)"
	@test -x $(VENV_LOCK)/bin/uv || { $(PYTHON) -m venv $(VENV_LOCK) && \
		$(VENV_LOCK)/bin/python -m pip install --progress-bar on 'uv==$(UV_VERSION)' 'packaging>=24'; }
	@echo "==> [lock 2/2] resolving pyproject.toml into $(LOCK)"
	$(VENV_LOCK)/bin/python tools/lock.py --write

env: $(STAMP)

demo: $(STAMP_CORE)
	@echo "==> [demo] writing a small Rumi time series to demo-data/ and analysing it"
	$(PY) -m rumi_xarray demo --out demo-data

# The suite without its slow cases (`make bench` runs those; mypy, among them, is
# `make lint`'s, which CI runs after this), then the dask-facing tests
# again under dask's array query planning, announced to become dask's default. Both spread
# over TEST_WORKERS pytest-xdist workers (one per core here); `--dist loadgroup` keeps each
# test file on one worker (tests/conftest.py), so its module fixtures are made once, and
# gives each notebook a worker of its own. TEST_WORKERS=0 runs in this process alone.
TEST_WORKERS ?= 2
PYTEST_XDIST = -n $(TEST_WORKERS) --dist loadgroup
test: $(STAMP)
	@echo "==> [test 1/2] the suite without its slow cases on $(TEST_WORKERS) workers"
	$(PY) -m pytest -q $(PYTEST_XDIST) -m "not slow"
	@echo "==> [test 2/2] the dask-facing tests again under dask's array query planning"
	DASK_ARRAY__QUERY_PLANNING=True $(PY) -m pytest -q $(PYTEST_XDIST) -m "dask and not slow" \
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
	$(PY) benchmarks/chips.py --karu
	$(PY) benchmarks/overviews.py
	$(PY) benchmarks/explore_click.py

# The hostile-input property test with many more examples than `make test` runs, and the
# soak tests (threads reading at once; no growth of descriptors, threads or memory) ten
# times longer.
fuzz: $(STAMP)
	RUMI_FUZZ_EXAMPLES=2000 RUMI_SOAK_SECONDS=80 RUMI_SOAK_READS=30000 $(PY) -m pytest -q \
		tests/test_hardening.py::test_hostile_inputs_never_crash_or_hang \
		tests/test_hardening.py::test_threads_soak_equals_ground_truth \
		tests/test_hardening.py::test_no_fd_thread_or_memory_growth

# ruff, then mypy with the settings of [tool.mypy] in pyproject.toml.
lint: $(STAMP)
	$(VENV)/bin/ruff check rumi_xarray tests benchmarks notebooks tools docs
	$(VENV)/bin/mypy rumi_xarray

# The suite against the oldest versions pyproject.toml declares (every `>=` floor of the
# core dependencies and of the test extra, pinned by tools/min_constraints.py), in its
# own venv so .venv keeps current releases. CI runs `make test` only: run this when a
# dependency, a floor or a use of a newer library API changes (about 6 minutes from
# scratch on 2 cores: 1.5 to install, 4.5 to test; too long to add to CI's `make test`).
VENV_MIN := .venv-min
STAMP_MIN := $(VENV_MIN)/.installed

$(STAMP_MIN): pyproject.toml tools/min_constraints.py requirements/pins.in
	@echo "==> [setup-min 1/3] creating the virtual environment $(VENV_MIN)"
	rm -rf $(VENV_MIN)
	$(PYTHON) -m venv $(VENV_MIN)
	$(VENV_MIN)/bin/python -m pip install --progress-bar on --upgrade pip
	@echo "==> [setup-min 2/3] pinning every declared floor (tools/min_constraints.py)"
	$(PYTHON) tools/min_constraints.py pyproject.toml > $(VENV_MIN)/constraints.txt
	@echo "==> [setup-min 3/3] installing the test extra at those floors (not from $(LOCK))"
	$(VENV_MIN)/bin/python -m pip install --progress-bar on --no-compile -c $(VENV_MIN)/constraints.txt \
		-e '.[test]'
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
	rm -rf $(VENV) $(VENV_MIN) $(VENV_LOCK) build dist demo-data bench-data docs/_build docs/api \
		docs/examples docs/benchmarks/generated docs/guide/readme
