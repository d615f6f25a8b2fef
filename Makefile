# make demo: create .venv, install muser_mlx (with the test, notebook and lm extras), run the demo.
# make test: the same, then the tests (the examples notebook included).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test install clean

demo: $(STAMP)
	$(BIN)/muser-mlx demo

test: $(STAMP)
	$(BIN)/python -m pytest -q

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[test,notebook,lm]"
	touch $(STAMP)

clean:
	rm -rf $(VENV) build *.egg-info
