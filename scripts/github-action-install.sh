#!/usr/bin/env bash
# The install step of the imagelint GitHub Action (action.yml).
#
# Installs imagelint into its own virtual environment (so an externally managed system Python is
# never touched) and prints that environment's python as the step output `python`.
#   IMAGELINT_VERSION  a released version from PyPI (e.g. 0.1.0); empty: the action's own checkout
#   IMAGELINT_EXTRAS   optional extras, comma-separated (e.g. disk: raw, qcow2, vmdk, vhd(x) images)
#   IMAGELINT_SOURCE   the checkout to install when no version is given (default: $GITHUB_ACTION_PATH)
#   IMAGELINT_VENV     where the environment goes (default: $RUNNER_TEMP/imagelint-venv)
#   BOOTSTRAP_PYTHON   the Python that creates it (default: python3)
set -euo pipefail

extras="${IMAGELINT_EXTRAS:-}"
if ! [[ "$extras" =~ ^([a-z]+(,[a-z]+)*)?$ ]]; then
    echo "imagelint: error: extras: '${extras//[^a-z,]/?}' is not a comma-separated list of extras (e.g. disk)" >&2
    exit 2
fi
venv="${IMAGELINT_VENV:-${RUNNER_TEMP:-/tmp}/imagelint-venv}"
"${BOOTSTRAP_PYTHON:-python3}" -I -m venv "$venv"
if [ -n "${IMAGELINT_VERSION:-}" ]; then
    spec="imagelint${extras:+[$extras]}==${IMAGELINT_VERSION}"
else
    spec="${IMAGELINT_SOURCE:-${GITHUB_ACTION_PATH:?no version given and GITHUB_ACTION_PATH is not set}}"
    spec="$(cd "$spec" && pwd)${extras:+[$extras]}"
fi
"$venv/bin/python" -I -m pip install --quiet --disable-pip-version-check "$spec"
"$venv/bin/python" -I -m imagelint --version
if [ -n "${GITHUB_OUTPUT:-}" ]; then
    delimiter="ghadelimiter_$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
    printf 'python<<%s\n%s\n%s\n' "$delimiter" "$venv/bin/python" "$delimiter" >>"$GITHUB_OUTPUT"
fi
