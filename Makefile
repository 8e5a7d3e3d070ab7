# imagelint: the two set-up commands the README gives, and a few conveniences.
.PHONY: demo test lint docs bench clean

VENV := .venv
BIN := $(VENV)/bin
SAMPLE := build/sample-image

## demo: install, build the bundled faulty sample image, and audit it (findings are expected)
demo:
	scripts/install.sh
	rm -rf $(SAMPLE)
	$(BIN)/python scripts/make-sample-image.py examples/sample-image.yaml $(SAMPLE)
	$(BIN)/imagelint audit $(SAMPLE) -c examples/sample.imagelint.yaml --show-waived -f text -f json:build/sample-report.json; \
	  code=$$?; echo "imagelint exited $$code (1 = findings at or above fail-on); JSON report: build/sample-report.json"; \
	  test $$code -eq 1

## test: install everything the tests need (system packages too) and run the whole suite: first every
## test not marked serial on TEST_WORKERS xdist workers, a test file per worker (its module fixtures
## are built once), then the serial ones alone (tests/conftest.py); each phase names its ten slowest tests
TEST_WORKERS ?= 4
# each phase ends with its ten slowest tests: a test that became slow shows in the CI log
DURATIONS := --durations=10
test:
	scripts/install.sh --test
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile -m "not serial" $(DURATIONS); parallel=$$?; \
	  $(BIN)/python -m pytest -m serial $(DURATIONS); serial=$$?; \
	  test $$parallel -eq 0 -a $$serial -eq 0

lint:
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

## docs: rewrite the generated pages of the docs site (rules, configuration, IAM policies, the Action)
## and its pictures (headless Chromium), then build the site into site/ (strict: a broken link fails)
docs:
	$(BIN)/python -m imagelint.docs
	$(BIN)/python scripts/docs-screenshots.py
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

bench:
	$(BIN)/python benchmarks/audit_vs_systemctl.py
	$(BIN)/python benchmarks/startup.py
	$(BIN)/python benchmarks/units_vs_systemctl.py

clean:
	rm -rf build dist .pytest_cache .ruff_cache
