# ragmesh: `make run` starts the embedded mesh and answers a question; `make test` runs the suite;
# `make compose-test` builds every image, boots the Compose stack and tests it through nginx.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PY     := $(BIN)/python
UV_VERSION := 0.13.9
STAMP  := $(VENV)/.installed-stamp
GEN    := libs/gen/ragmesh/v1
PROTOS := $(wildcard proto/ragmesh/v1/*.proto)
PYTEST_ARGS ?=
# make test runs on this many pytest-xdist workers; PYTEST_WORKERS=0 runs the suite in one process.
PYTEST_WORKERS ?= 2

export OMP_WAIT_POLICY ?= PASSIVE

.PHONY: setup gen run test compose-test wheelhouse lock clean eval conformance-tools

EDITABLE := $(VENV)/.editable-stamp

setup: $(EDITABLE)

$(STAMP): requirements.lock requirements-nodeps.lock
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "ragmesh needs Python 3.11+; set PYTHON=python3.11")'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check uv==$(UV_VERSION)
	$(BIN)/uv pip sync -q --python $(PY) requirements.lock requirements-nodeps.lock
	touch $@

# Stubs (and typing stubs) are generated into the ignored libs/gen package, never edited by hand.
$(GEN)/.stamp: $(PROTOS) $(STAMP)
	rm -rf libs/gen && mkdir -p $(GEN)
	$(PY) -m grpc_tools.protoc -I proto --python_out=libs/gen --pyi_out=libs/gen --grpc_python_out=libs/gen $(PROTOS)
	touch libs/gen/ragmesh/__init__.py $(GEN)/__init__.py $@

gen: $(GEN)/.stamp

$(EDITABLE): $(GEN)/.stamp pyproject.toml
	$(BIN)/uv pip install -q --python $(PY) --no-deps --no-build-isolation -e .
	touch $@

run: setup
	$(BIN)/ragmesh up --corpus docs --ask "What does the indexer service own?"

# A module runs on one worker, and the tests sharing a mesh or a model runtime on the same one
# (tests/worker_groups.py), longest first: what a serial run starts once starts once.
# Bytecode caches (__pycache__, ignored by git) are written even where the shell says not to
# (PYTHONDONTWRITEBYTECODE): a run starts hundreds of Python processes (each mesh's services, every
# CLI call of the tests and of the docs' examples), and without them each compiles its imports from
# source again, and each worker its rewritten test modules (collection: 76 s -> 16 s, load 6-11).
test: setup
	env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadgroup --no-loadscope-reorder $(PYTEST_ARGS)

# Images, the Compose stack and tests/compose against it (docs/operations.md, "Compose in CI");
# starts its own Docker engine where none runs (as root), and leaves the host as it found it.
compose-test: setup
	deploy/compose-test/run

# The wheels every image installs, for building images offline (deploy/wheelhouse/).
wheelhouse: setup
	deploy/requirements/download-wheels

# Node 22 and the official MCP tools (conformance suite, Inspector) from the npm registry, pinned with
# hashes in tests/conformance/npm/package-lock.json; installed once, then the tests run offline.
# Without them those tests skip (CI=true: fail). .ci/run installs them.
NPM_TOOLS := tests/conformance/npm
$(NPM_TOOLS)/node_modules/.installed-stamp: $(NPM_TOOLS)/package-lock.json
	npm ci --prefix $(NPM_TOOLS) --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $@

conformance-tools: $(NPM_TOOLS)/node_modules/.installed-stamp

# Recompile the lock files from requirements*.in (needs network to PyPI). Each image's lock
# (deploy/requirements/<image>.lock) takes its versions from requirements.lock.
lock: $(STAMP)
	$(BIN)/uv pip compile -q requirements.in -o requirements.lock --generate-hashes --python-version 3.11
	$(BIN)/uv pip compile -q requirements-nodeps.in -o requirements-nodeps.lock --no-deps --generate-hashes
	for spec in deploy/requirements/*.in; do \
	  $(BIN)/uv pip compile -q $$spec -c requirements.lock -o $${spec%.in}.lock --generate-hashes --python-version 3.11 || exit 1; \
	done

# Stops the mesh first (`ragmesh down`: services, embedded PostgreSQL and Redis), so no server is left
# running on a deleted data folder; keeps the state folder when it cannot stop it.
clean:
	@if [ -d .ragmesh-state ]; then \
	  if [ -x $(BIN)/ragmesh ]; then \
	    $(BIN)/ragmesh down --state-dir .ragmesh-state >/dev/null || { echo "make clean: .ragmesh-state kept: ragmesh down failed"; exit 1; }; \
	  else \
	    echo "make clean: .ragmesh-state kept: without $(VENV) nothing can stop what runs from it (make setup, then make clean)"; exit 1; \
	  fi; \
	fi
	rm -rf $(VENV) libs/gen .ragmesh-state .pytest_cache $(NPM_TOOLS)/node_modules
