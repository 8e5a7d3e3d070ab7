# imagelint: the two set-up commands the README gives, and a few conveniences.
.PHONY: demo test test-vm test-quick lint docs bench clean

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
## are built once), and beside them, in a process of its own, the tests marked lane one at a time
## (they mostly wait: a VM under emulation, a power-off timer; their log follows the parallel phase's);
## then the serial ones alone (tests/conftest.py); each phase names its ten slowest tests and ends with
## one line naming and counting what did not run as written (skips, xfail, xpass); the VM boots beyond
## the first (marked vm_boots) are `make test-vm`
# one worker per CPU this process may use (nproc honours CPU affinity)
TEST_WORKERS ?= $(shell nproc 2>/dev/null || echo 2)
# marks this machine cannot run, left out of every phase: CI on GitHub's runners (cgroup v2 only)
# sets TEST_EXCLUDE=cgroup_v1 (.github/workflows/ci.yml)
TEST_EXCLUDE ?=
NOT_EXCLUDED := $(foreach mark,$(TEST_EXCLUDE), and not $(mark))
# each phase ends with its ten slowest tests: a test that became slow shows in the CI log
DURATIONS := --durations=10
# the lane's log, printed once the parallel phase has ended (two logs at once would interleave)
LANE_LOG := build/test-lane.log
test:
	scripts/install.sh --test
	mkdir -p build; \
	  $(BIN)/python -m pytest -p no:cacheprovider -m "lane and not vm_boots$(NOT_EXCLUDED)" $(DURATIONS) >$(LANE_LOG) 2>&1 & lane_pid=$$!; \
	  $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile -m "not serial and not lane and not vm_boots$(NOT_EXCLUDED)" $(DURATIONS); parallel=$$?; \
	  wait $$lane_pid; lane=$$?; echo "== the lane, beside the parallel phase ($(LANE_LOG)):"; cat $(LANE_LOG); \
	  $(BIN)/python -m pytest -m "serial and not lane and not vm_boots$(NOT_EXCLUDED)" $(DURATIONS); serial=$$?; \
	  test $$parallel -eq 0 -a $$lane -eq 0 -a $$serial -eq 0

## test-vm: the VM boots `make test` leaves out (tests marked vm_boots: the clean image passing whole,
## signals and the disk cap during a real run, UEFI, the Action's soak mode), one at a time; minutes
## each under TCG, seconds with KVM (GitHub's CI runs them there)
test-vm:
	scripts/install.sh --test
	$(BIN)/python -m pytest -m "vm_boots$(NOT_EXCLUDED)" $(DURATIONS)

## test-quick: the tests of the inner layers (parsers, checks, rule packs, report, diff, config), no
## root, no container, nothing slow or serial: about 250 CPU-seconds (2 to 3 minutes on 2 idle cores),
## for the edit-and-test loop (after `make test` once, or `scripts/install.sh --test`)
QUICK := tests/facts tests/checks tests/rulepacks tests/report tests/diff tests/textmatch \
  tests/test_config.py tests/test_engine.py tests/test_durations.py
test-quick:
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile -m "not serial and not lane and not slow and not root" $(QUICK)

lint:
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

## docs: rewrite the generated pages of the docs site (rules, configuration, IAM policies, the Action)
## its pictures (headless Chromium, when installed: scripts/install.sh --test), then build the site into
## build/site (`mkdocs build --strict`: a broken link fails); installs the docs group (Material for
## MkDocs) into .venv first, so it works right after `make demo`
docs:
	$(BIN)/python -m pip install -q --group docs
	$(BIN)/python -m imagelint.docs
	if command -v chromium >/dev/null; then $(BIN)/python scripts/docs-screenshots.py; \
	  else echo "make docs: no chromium (scripts/install.sh --test installs it): the pictures were not retaken" >&2; fi
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict --site-dir build/site

bench:
	$(BIN)/python benchmarks/audit_vs_systemctl.py
	$(BIN)/python benchmarks/startup.py
	$(BIN)/python benchmarks/units_vs_systemctl.py

clean:
	rm -rf build dist .pytest_cache .ruff_cache
