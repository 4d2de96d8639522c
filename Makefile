VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip

.PHONY: test test-slow venv demo docs clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[dev]'
	# rfc3987-syntax (pulled in by jupyter-events' jsonschema[format-nongpl]) compiles a Lark grammar
	# when jsonschema is imported: 2.8 s of CPU in every Ray process (Ray imports jsonschema), which
	# made a local Ray miss its 30 s start-up deadline on a busy 2-core machine. jsonschema skips
	# that format check without it.
	$(PIP) uninstall -y -q rfc3987-syntax
	touch $@

venv: $(VENV)/.installed

test: venv
	$(PY) -m pytest -q -p no:cacheprovider

# The slow tests: a real Ray runtime (the cluster in RAY_ADDRESS, else a local one) and the
# notebook that runs on it. .ci/run calls this after `make test`.
test-slow: venv
	$(PY) -m pytest -q -p no:cacheprovider -m slow

# Execute notebooks/01_quickstart.ipynb end to end; write reports/quickstart.html (+ .ipynb) and
# print the metrics table; then `evalnb report` writes the run report of the notebook's run.
# Local stand-in models, or real ones with OPENAI_API_KEY / EVALNB_BASE_URL.
demo: venv
	$(PY) scripts/build_report.py
	$(PY) -m evalnb --home reports/quickstart_home report latest -o reports/quickstart_run.html
	@echo "notebook report: reports/quickstart.html   run report: reports/quickstart_run.html"

clean:
	rm -rf $(VENV) .evalnb reports

# The documentation site (docs/ -> docs/_build/html), built offline without executing a
# notebook; warnings are errors.
$(VENV)/.docs-installed: pyproject.toml
	@test -x $(PY) || python3 -m venv $(VENV)
	@$(PIP) install -q -e '.[docs]'
	@touch $@

docs: $(VENV)/.docs-installed
	@$(PY) -m sphinx -b html -q -W --keep-going docs docs/_build/html
	@echo "documentation: docs/_build/html/index.html"
