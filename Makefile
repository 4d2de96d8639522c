# `make demo`: the quickstart notebook run end to end into shareable reports (installs the package
# and its `notebook` extra only). `make test`: the test suite (installs the `dev` extra).
# `make docs`: the documentation site in docs/_build/html (the `docs` extra), offline.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/python -m pip -qq --disable-pip-version-check
PYTEST := $(PY) -m pytest -p no:cacheprovider --durations=15

.PHONY: demo test test-slow docs venv clean

$(VENV)/bin/python:
	@python3 -m venv $(VENV)

# What the demo needs: the package and its notebook extra (nbconvert, nbclient, ipykernel).
$(VENV)/.demo-installed: pyproject.toml | $(VENV)/bin/python
	@echo "Installing evalnb and its notebook extra into $(VENV) ..."
	@$(PIP) install --no-compile -e '.[notebook]'
	@touch $@

# rfc3987-syntax (pulled in by jupyter-events) compiles a Lark grammar whenever jsonschema is
# imported: 2.8 s of CPU in every Ray process, enough to miss Ray's start-up deadline on a busy
# 2-core machine; jsonschema skips that format check without it.
$(VENV)/.installed: pyproject.toml | $(VENV)/bin/python
	@echo "Installing evalnb with its dev extra into $(VENV) (a few minutes the first time) ..."
	@$(PIP) install -e '.[dev]'
	@$(PIP) uninstall -y rfc3987-syntax
	@touch $@ $(VENV)/.demo-installed

$(VENV)/.docs-installed: pyproject.toml | $(VENV)/bin/python
	@$(PIP) install -e '.[docs]'
	@touch $@

venv: $(VENV)/.installed

# Per-file progress lines (not dots), the slowest tests at the end.
test: $(VENV)/.installed
	@$(PYTEST) -o console_output_style=count

# The slow tests: a real Ray runtime and the notebook that runs on it (.ci/run calls this too).
test-slow: $(VENV)/.installed
	@$(PYTEST) -o console_output_style=count -m slow

demo: $(VENV)/.demo-installed
	@$(PY) scripts/build_report.py
	@$(PY) -m evalnb --home reports/quickstart_home report latest -o reports/quickstart_run.html >/dev/null
	@echo "notebook report: reports/quickstart.html   run report: reports/quickstart_run.html"

# The documentation site, built offline without executing a notebook; warnings are errors.
docs: $(VENV)/.docs-installed
	@$(PY) -m sphinx -b html -q -W --keep-going docs docs/_build/html
	@echo "documentation: docs/_build/html/index.html"

clean:
	@rm -rf $(VENV) .evalnb reports docs/_build docs/_api docs/examples/*.ipynb
