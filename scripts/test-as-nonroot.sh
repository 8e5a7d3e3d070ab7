#!/usr/bin/env bash
# The suite as a developer without root runs it: both phases of `make test` (not serial, then
# serial; the tests of make test's lane run in the first), without scripts/install.sh (its apt step
# needs root) and without IMAGELINT_NO_SKIP, so a test that needs root, debootstrap or a container
# skips and the last line of each phase names and counts the skips (tests/conftest.py). Nothing may
# fail.
#
#   sudo scripts/test-as-nonroot.sh [PYTEST ARGS...]    e.g. tests/checks tests/soak
#
# Run as root, it creates the user $IMAGELINT_TEST_USER (default imagelint-test), clones this
# checkout's HEAD into its home (a path it owns; commit first), builds its own venv with the system
# python3 and runs the suite as that user (`runuser`), its caches under its own ~/.cache.
# IMAGELINT_WHEELHOUSE=DIR installs from a directory of wheels (`pip wheel -w DIR '.[disk,watch]'
# --group test`; built by another Python, add what Debian 12's python3 3.11.2 needs, e.g.
# pymdown-extensions<13) instead of the index. Run as a user that is not root, it runs the suite in this
# checkout with ./.venv. TEST_WORKERS (default 1) and `nice -n 19`: a shared machine stays usable.
set -euo pipefail
cd "$(dirname "$0")/.."
workers="${TEST_WORKERS:-1}"

if [ "$(id -u)" != 0 ]; then
    [ -x .venv/bin/python ] || { echo "test-as-nonroot: no .venv here (scripts/install.sh --test)" >&2; exit 2; }
    set +e
    nice -n 19 .venv/bin/python -m pytest -n "$workers" --dist loadfile -m "not serial" "$@"; parallel=$?
    nice -n 19 .venv/bin/python -m pytest -m serial "$@"; serial=$?
    [ "$parallel" -eq 0 ] && [ "$serial" -eq 0 ]
    exit
fi

user="${IMAGELINT_TEST_USER:-imagelint-test}"
id "$user" >/dev/null 2>&1 || useradd -m -s /bin/bash "$user"
home="$(getent passwd "$user" | cut -d: -f6)"
clone="$home/imagelint"
as_user() { runuser -u "$user" -- env -u IMAGELINT_NO_SKIP HOME="$home" "$@"; }
# cloned as root (git refuses to read a repository another user owns), then handed to the user
[ -d "$clone/.git" ] || git clone -q --no-checkout "$PWD" "$clone"
clone_git() { git -c safe.directory="$clone" -C "$clone" "$@"; }
clone_git fetch -q "$PWD" HEAD && clone_git checkout -q --detach FETCH_HEAD
chown -R "$user:" "$clone"
pip=(python -m pip install -q)
[ -n "${IMAGELINT_WHEELHOUSE:-}" ] && pip+=(--no-index --find-links "$IMAGELINT_WHEELHOUSE")
as_user bash -c "cd '$clone' && { [ -x .venv/bin/python ] || python3 -m venv .venv; } \
    && .venv/bin/${pip[*]} --upgrade pip && .venv/bin/${pip[*]} -e '.[disk,watch]' --group test"
set +e
as_user env TEST_WORKERS="$workers" "$clone/scripts/test-as-nonroot.sh" "$@"
