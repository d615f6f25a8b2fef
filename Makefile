# make demo: create .venv, install muser_mlx (with the test, notebook, lint and lm extras), run the demo.
# make test: the same, then ruff and the tests (the examples notebook included).
# make lint: ruff's lint and format checks; make format: ruff's fixes and formatting, and
# clang-format over kernels/ (kernels/.clang-format), in place.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint format install clang clean

demo: $(STAMP)
	$(BIN)/muser-mlx demo

test: $(STAMP) clang lint
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .
	@if command -v clang-format >/dev/null; then clang-format -i kernels/*.h kernels/*.cu kernels/*.metal; \
	else echo "clang-format not found (Debian: apt-get install clang-format): kernels/ left as they are"; fi

install: $(STAMP)

# clang++ compiles the generated Metal source with Metal's address spaces (tests/metal_check.py).
# Installed from the distribution's packages where it is absent and apt-get can (as root, as in
# CI); elsewhere tests/test_metal_check.py skips, saying so.
clang:
	@command -v clang++ >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang >/dev/null; } || \
		echo "clang++ not found and not installable here: tests/test_metal_check.py will skip"

# The install builds the CPU extension (setup.py) from kernels/ and csrc/: a change there rebuilds it.
$(STAMP): pyproject.toml setup.py CMakeLists.txt $(wildcard csrc/*) $(wildcard kernels/*.h)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[test,notebook,lint,lm]"
	touch $(STAMP)

clean:
	rm -rf $(VENV) build *.egg-info muser_mlx/_cpu*.so
