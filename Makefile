# One command each: `make serve` sets up and runs Orchard on its embedded defaults;
# `make test` sets up and runs the whole test suite (what CI runs).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
EXTRAS ?= dev,redis,postgres,s3

.PHONY: setup serve test lint openapi clean

$(BIN)/orchard: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[$(EXTRAS)]"
	touch $(BIN)/orchard

setup: $(BIN)/orchard

serve: setup
	$(BIN)/orchard serve

test: setup
	$(BIN)/ruff check .
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(BIN)/pytest -n 2 -q

lint: setup
	$(BIN)/ruff check .

openapi: setup
	$(BIN)/orchard export-openapi --output openapi/openapi.json

clean:
	rm -rf $(VENV) orchard-data .pytest_cache
