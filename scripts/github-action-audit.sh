#!/usr/bin/env bash
# The audit step of the imagelint GitHub Action (action.yml); tests/github/test_action.py runs exactly this.
#
# Inputs arrive in the environment, never interpolated into the script:
#   IMAGELINT_TARGET        root directory of the mounted image (required)
#   IMAGELINT_CONFIG        config file (empty: .imagelint.yaml in the working directory, if any)
#   IMAGELINT_FAIL_ON       empty, or info|low|medium|high|critical
#   IMAGELINT_FORMATS       extra FORMAT:PATH outputs, separated by whitespace (e.g. junit:imagelint.xml)
#   IMAGELINT_REPORT        the JSON report's path (always written; default imagelint-report.json)
#   IMAGELINT_SARIF         the SARIF file's path (empty: no SARIF)
#   IMAGELINT_SARIF_ANCHOR  the repository file SARIF results point at (empty: the config file)
#   IMAGELINT_PYTHON        the Python imagelint is installed in (default: python3)
# imagelint itself writes the annotations, the step summary and the outputs verdict, failed,
# findings, exit-code and report-sha256; this script adds report-path and sarif-path.
# The exit code is imagelint's (0 pass, 1 fail, 2 bad usage, 3 inconclusive): it is the gate.
set -uo pipefail

report="${IMAGELINT_REPORT:-imagelint-report.json}"
sarif="${IMAGELINT_SARIF:-}"
args=(audit "${IMAGELINT_TARGET:?the target input is required}" --github -f text -f github -f "json:$report")
[ -n "${IMAGELINT_CONFIG:-}" ] && args+=(--config "$IMAGELINT_CONFIG")
[ -n "${IMAGELINT_FAIL_ON:-}" ] && args+=(--fail-on "$IMAGELINT_FAIL_ON")
[ -n "$sarif" ] && args+=(-f "sarif:$sarif")
[ -n "${IMAGELINT_SARIF_ANCHOR:-}" ] && args+=(--sarif-anchor "$IMAGELINT_SARIF_ANCHOR")
read -r -a extra <<<"${IMAGELINT_FORMATS:-}"
for spec in "${extra[@]}"; do
    args+=(-f "$spec")
done

"${IMAGELINT_PYTHON:-python3}" -m imagelint "${args[@]}"
code=$?

if [ -n "${GITHUB_OUTPUT:-}" ]; then
    for pair in "report-path=$report" "sarif-path=$sarif"; do
        delimiter="ghadelimiter_$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
        printf '%s<<%s\n%s\n%s\n' "${pair%%=*}" "$delimiter" "${pair#*=}" "$delimiter" >>"$GITHUB_OUTPUT"
    done
fi
exit "$code"
