VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip

.PHONY: test venv demo clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[dev]'
	touch $@

venv: $(VENV)/.installed

test: venv
	$(PY) -m pytest -q -p no:cacheprovider

clean:
	rm -rf $(VENV) .evalnb reports
