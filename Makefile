# The two commands of the README: `make run` and `make test`. Each sets up .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: run demo test check stress bench bench-docs docs lint mutate clean

$(STAMP): pyproject.toml constraints.txt setup.py $(wildcard ackstore/*.c ackstore/*.h) ackstore/fields.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[dev,bench,spark,fast,metrics]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/python -m ackstore.tools.spark_cli pipeline out --scale small

demo: $(STAMP)
	$(BIN)/python -m ackstore.tools.demo

# the whole suite with the compiled codecs and lane, in two processes (one a core): the
# first runs every test but the Spark and docs ones; the second runs the fast tests again
# with their pure-Python twins (what an install without a C compiler runs), then the Spark
# and docs tests with the compiled module (so that the two take about as long); its output
# follows; fails if any fails
test: $(STAMP)
	@twins=$$(mktemp -d); \
	( ACKSTORE_PURE_PYTHON=1 $(BIN)/python -m pytest -q -m "not slow" --basetemp="$$twins/tmp"; pure=$$?; \
	  echo "== the Spark and docs tests (the compiled module):"; \
	  $(BIN)/python -m pytest -q -m "spark or docs" --basetemp="$$twins/native" -p no:cacheprovider; spark=$$?; \
	  test $$pure -eq 0 && test $$spark -eq 0 ) > "$$twins/log" 2>&1 & second=$$!; \
	$(BIN)/python -m pytest -q -m "not spark and not docs"; native=$$?; \
	wait $$second; status=$$?; \
	echo "== the fast tests on the pure-Python twins (ACKSTORE_PURE_PYTHON=1):"; cat "$$twins/log"; rm -rf "$$twins"; \
	test $$native -eq 0 && test $$status -eq 0

stress: $(STAMP)
	$(BIN)/python -m pytest -q -m stress --long

bench: $(STAMP)
	$(BIN)/python -m pytest -q benchmarks

# each suite in a process of its own (a suite's figures do not depend on what ran before it),
# its cases saved as JSON; the tables are made from all of them
bench-docs: $(STAMP)
	rm -rf out/bench && mkdir -p out/bench
	for suite in benchmarks/test_bench_*.py; do \
		$(BIN)/python -m pytest -q $$suite --benchmark-json out/bench/$$(basename $$suite .py).json || exit 1; \
	done
	$(BIN)/python -m benchmarks.tables out/bench --docs docs/benchmarks.md
	$(BIN)/python -m benchmarks.scale --docs docs/benchmarks.md
	$(BIN)/python -m benchmarks.history_window --docs docs/benchmarks.md
	$(BIN)/python -m benchmarks.ack_wait --docs docs/benchmarks.md
	$(BIN)/python -m benchmarks.spark_tables --docs docs/spark.md

docs: $(STAMP)
	$(BIN)/python -m ackstore.tools.apidoc out/api

# mutation testing of the engine's rules (not part of CI; see docs/reliability.md): mutmut
# mutates the modules [tool.mutmut] names in a copy (mutants/), and runs each mutant against
# the fast tests that reach it, on the pure-Python twins; `mutmut results` lists survivors
mutate: $(STAMP)
	$(BIN)/pip install --quiet --disable-pip-version-check -c constraints.txt mutmut
	ACKSTORE_PURE_PYTHON=1 $(BIN)/mutmut run
	$(BIN)/python -m ackstore.tools.mutation_score

check: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow"

lint: $(STAMP)
	$(BIN)/ruff check ackstore recovery tools tests benchmarks
	$(BIN)/ruff format --check ackstore recovery tools tests benchmarks
	$(BIN)/mypy

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis .benchmarks out mutants
