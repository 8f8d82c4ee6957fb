# Developer entry points.  `make test` sets up everything the test suite needs and runs it.
PYTHON ?= python3
APT_PACKAGES := coq chromium

.PHONY: setup test quick lint bench demo

setup:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi
	$(PYTHON) -m pip install -q -e '.[test]'
	$(PYTHON) -m clefprove.cli.bytecode

test: setup
	$(PYTHON) -m pytest --all

# the default tier only (no slow tests, quick Hypothesis profile); see tests/README.md
quick: setup
	$(PYTHON) -m pytest

lint:
	$(PYTHON) -m ruff check clefprove tests bench examples
	$(PYTHON) -m ruff format --check clefprove tests bench examples
	$(PYTHON) -m mypy

demo:
	$(PYTHON) -m pip install -q -e .
	$(PYTHON) -m clefprove.cli.bytecode
	clefprove check examples/edge-allow-block.clef invariants/

bench:
	$(PYTHON) -m pip install -q -e '.[test,bench]'
	for b in bench/bench_*.py; do $(PYTHON) $$b || exit 1; done
