# cardtime — two commands on a fresh machine: `make rehearse` and `make test`.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: help rehearse test bench lint report
help:
	@echo "make rehearse   the whole suite on CPU (gloo, 4 processes), ending in runs/<id>/report.html"
	@echo "make test       the test suite"
	@echo "make bench      timing figures (rehearsal wall time, harness overhead)"

# The venv is (re)built when pyproject.toml changes. torch==2.13.0 is pinned: pip takes the CPU
# build from local disk; an unpinned torch would pull a multi-GB CUDA build.
$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	@touch $(STAMP)

rehearse: $(STAMP)
	@mkdir -p runs; status=0; \
	$(PY) -m suite run --profile gloo-cpu --out runs --record-last runs/LAST $(ARGS) || status=$$?; \
	$(PY) -m reports "$$(cat runs/LAST)" || status=$$((status ? status : 1)); \
	exit $$status

report: $(STAMP)
	$(PY) -m reports $(RUN)

test: $(STAMP)
	$(PY) -m pytest -q $(PYTEST_ARGS)

bench: $(STAMP)
	$(PY) -m tests.bench
