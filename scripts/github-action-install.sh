#!/usr/bin/env bash
# The install step of the imagelint GitHub Action (action.yml).
#
# Installs imagelint into its own virtual environment (so an externally managed system Python is
# never touched) and prints that environment's python as the step output `python`.
#   IMAGELINT_VERSION  a released version from the package index pip is configured with (e.g. 0.1.0);
#                      empty: the action's own checkout
#   IMAGELINT_EXTRAS   optional features, comma-separated (disk, watch); empty: none
#   IMAGELINT_SOURCE   the checkout to install when no version is given (default: $GITHUB_ACTION_PATH)
#   IMAGELINT_VENV     where the environment goes (default: $RUNNER_TEMP/imagelint-venv)
#   BOOTSTRAP_PYTHON   the Python that creates it (default: python3)
# The step runs in the workspace, a checkout anyone can commit to: every Python runs isolated (-I:
# neither the working directory nor PYTHON* variables reach sys.path), so no venv.py, pip/ or
# imagelint/ planted there is imported.
set -euo pipefail

extras="${IMAGELINT_EXTRAS:-}"
extras="${extras//[[:space:]]/}"
if [ -n "$extras" ] && ! [[ "$extras" =~ ^[a-z][a-z0-9-]*(,[a-z][a-z0-9-]*)*$ ]]; then
    echo "imagelint: error: the extras input '${extras//[^[:alnum:],-]/?}': expected names separated by commas (disk, watch)" >&2
    exit 2
fi
venv="${IMAGELINT_VENV:-${RUNNER_TEMP:-/tmp}/imagelint-venv}"
"${BOOTSTRAP_PYTHON:-python3}" -I -m venv -- "$venv"
if [ -n "${IMAGELINT_VERSION:-}" ]; then
    spec="imagelint${extras:+[$extras]}==${IMAGELINT_VERSION}"
else
    source="${IMAGELINT_SOURCE:-${GITHUB_ACTION_PATH:?no version given and GITHUB_ACTION_PATH is not set}}"
    spec="$source${extras:+[$extras]}"
fi
"$venv/bin/python" -I -m pip install --quiet --disable-pip-version-check -- "$spec"
"$venv/bin/python" -I -m imagelint --version
if [ -n "${GITHUB_OUTPUT:-}" ]; then
    delimiter="ghadelimiter_$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
    printf 'python<<%s\n%s\n%s\n' "$delimiter" "$venv/bin/python" "$delimiter" >>"$GITHUB_OUTPUT"
fi
