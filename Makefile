# Two commands do everything (see README):
#   make run    build .venv if missing, then the whole pipeline on config.yaml
#               (SNAKEMAKE_ARGS="--configfile configs/cpu-extended.yaml" or "--config seed_offset=10")
#   make test   build .venv if missing, set up the tests' extras (tests/extras.py), then the test suite
#               (TEST_WORKERS=2 parallel workers)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
CORES ?= all
SNAKEMAKE_ARGS ?=
# pytest-xdist workers for make test (tests/conftest.py groups the tests)
TEST_WORKERS ?= 2

.PHONY: run test venv lint bench report clean-venv

venv: $(VENV)/.installed

# pip's output goes to logs/venv.log; on a failure its last lines are shown
$(VENV)/.installed: pyproject.toml
	@mkdir -p logs
	@echo "Installing the Python environment in $(VENV) (a few minutes the first time; pip's output: logs/venv.log)"
	@{ test -x $(BIN)/python || $(PYTHON) -m venv $(VENV); } > logs/venv.log 2>&1 \
	  && $(BIN)/pip install --upgrade pip >> logs/venv.log 2>&1 \
	  && $(BIN)/pip install -e '.[test]' >> logs/venv.log 2>&1 \
	  || { tail -n 30 logs/venv.log; echo "make venv failed: pip's whole output is in logs/venv.log" >&2; exit 1; }
	@touch $@

# sparselen.runtime.runlock: refuses a second run here while one is alive, and continues a killed one
# (removes its stale Snakemake lock, reruns incomplete jobs; trainings resume). Snakemake reads
# the workflow's default profile (profiles/default): one line per finished training, and the
# run ends with the claims' verdicts, its wall time and the report's path.
run: venv
	@$(BIN)/python -m sparselen.runtime.runlock --cores $(CORES) all $(SNAKEMAKE_ARGS)

# tests/extras.py first: the OLMo codebase and headless Chromium that two test modules read (cached)
test: venv
	@$(BIN)/python tests/extras.py
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder $(PYTEST_ARGS)

lint: venv
	$(BIN)/snakemake --lint
	$(BIN)/snakefmt --check Snakefile workflow/rules

report: venv
	$(BIN)/snakemake --cores $(CORES) $(SNAKEMAKE_ARGS) report
	$(BIN)/snakemake $(SNAKEMAKE_ARGS) --report report.html
	@echo "Reproduction report: $(CURDIR)/results/report/reproduction_report.html; Snakemake report: $(CURDIR)/report.html"

bench: venv
	$(BIN)/python benchmarks/throughput.py

clean-venv:
	rm -rf $(VENV)
