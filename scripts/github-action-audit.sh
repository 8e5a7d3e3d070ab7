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
#   IMAGELINT_BASELINE      the previous release's JSON report (empty: no baseline)
#   IMAGELINT_FAIL_ON_NEW   "true": with a baseline, only findings it lacks fail
#   IMAGELINT_FAIL_ON_DIFF  "true": with a baseline, a failing diff fails the step too
#   IMAGELINT_DIFF          the JSON diff's path (default imagelint-diff.json)
#   IMAGELINT_SUDO          auto|true|false (default auto): run the audit itself as root through
#                           `sudo -n` when this user is not root (auto: when sudo works without a
#                           password); an image's /root, /etc/shadow and .ssh are readable by root only
#   IMAGELINT_SOAK          empty: the offline audit above. A duration (10m, 90s; 0: boot and audit
#                           only): soak mode, `imagelint vm check --soak=DURATION -- TARGET`, the target a
#                           disk image file booted in a throwaway QEMU machine (the vm-host step
#                           installed QEMU and opened /dev/kvm; without KVM it runs under TCG). It runs
#                           as this user, never through sudo (sudo true is refused): the guest is the
#                           image's code, QEMU stays unprivileged. No baseline (vm check has no
#                           --baseline): refused
#   IMAGELINT_VM_FIRMWARE   soak mode: bios or uefi (empty: vm check's default, bios)
# imagelint itself writes the annotations, the step summary and the outputs verdict, failed,
# findings, exit-code and report-sha256; this script adds report-path and sarif-path, and with a
# baseline runs `imagelint diff BASELINE REPORT` (the new report: nothing is audited twice), adds
# its Markdown to the step summary and sets diff-path and diff-verdict.
# The exit code is imagelint's (0 pass, 1 fail, 2 bad usage, 3 inconclusive): it is the gate.
#
# No input reaches a command line as an option: the target is refused when it starts with '-' (exit 2)
# and is passed after `--`, like the diff's reports; every other value is an option's own argument
# (--config=VALUE, -f json:PATH). Under sudo, only the audit runs as root (with the GITHUB_*,
# RUNNER_* and IMAGELINT_* environment); the files it wrote are given back to this user before the
# diff reads them.
#
# A report is read only when it is this run's: the report, SARIF and diff paths are removed before
# imagelint runs, and imagelint leaves at every -f path this run's document or nothing (whatever ends
# it), so a file there afterwards was written by this run; report-path and sarif-path are empty
# when there is none. The step runs in the workspace, a checkout anyone can commit to: Python runs
# isolated (-I), so no typer.py, json.py or imagelint/ planted there is imported.
set -uo pipefail

report="${IMAGELINT_REPORT:-imagelint-report.json}"
sarif="${IMAGELINT_SARIF:-}"
target="${IMAGELINT_TARGET:?the target input is required}"
case "$target" in
    -*) echo "imagelint: error: the target input '${target//[^[:alnum:]._\/=*+-]/?}' starts with '-': give a path (./NAME for a file of that name)" >&2
        exit 2 ;;
esac
soak="${IMAGELINT_SOAK:-}"
if [ -n "$soak" ]; then
    args=(vm check --github -f text -f github -f "json:$report" "--soak=$soak")
    [ -n "${IMAGELINT_VM_FIRMWARE:-}" ] && args+=("--firmware=$IMAGELINT_VM_FIRMWARE")
    if [ -n "${IMAGELINT_BASELINE:-}" ]; then
        echo "imagelint: error: the baseline input is not supported with soak (vm check has no --baseline)" >&2
        exit 2
    fi
    if [ "${IMAGELINT_SUDO:-auto}" = true ]; then
        echo "imagelint: error: the sudo input is true, but soak mode runs the VM as this user, never as root" >&2
        exit 2
    fi
else
    args=(audit --github -f text -f github -f "json:$report")
fi
[ -n "${IMAGELINT_CONFIG:-}" ] && args+=("--config=$IMAGELINT_CONFIG")
[ -n "${IMAGELINT_FAIL_ON:-}" ] && args+=("--fail-on=$IMAGELINT_FAIL_ON")
[ -n "$sarif" ] && args+=(-f "sarif:$sarif")
[ -n "${IMAGELINT_SARIF_ANCHOR:-}" ] && args+=("--sarif-anchor=$IMAGELINT_SARIF_ANCHOR")
baseline="${IMAGELINT_BASELINE:-}"
[ -n "$baseline" ] && args+=("--baseline=$baseline")
[ -n "$baseline" ] && [ "${IMAGELINT_FAIL_ON_NEW:-false}" = "true" ] && args+=(--fail-on-new)
read -r -a extra <<<"${IMAGELINT_FORMATS:-}"
written=("$report" ${sarif:+"$sarif"})  # the files the audit writes (given back to this user under sudo)
for spec in "${extra[@]}"; do
    args+=(-f "$spec")
    [[ "$spec" == *:* ]] && written+=("${spec#*:}")
done
args+=(-- "$target")
python="${IMAGELINT_PYTHON:-python3}"
imagelint=("$python" -I -m imagelint)
diff_path="${IMAGELINT_DIFF:-imagelint-diff.json}"
rm -f -- "$report" ${sarif:+"$sarif"} ${baseline:+"$diff_path"}

# sudo: root reads what the image keeps from other users; sudo -n never waits for a password
as_root=()
case "${IMAGELINT_SUDO:-auto}" in
    false) ;;
    true | auto)
        if [ -z "$soak" ] && [ "$(id -u)" != 0 ]; then  # soak mode: never root (true refused above)
            if sudo -n true 2>/dev/null; then
                python_path="$(command -v -- "$python")" || { echo "imagelint: error: $python: not found" >&2; exit 2; }
                imagelint=("$python_path" -I -m imagelint)
                as_root=(sudo -n -H -- env)
                while IFS= read -r name; do
                    as_root+=("$name=${!name}")
                done < <(compgen -e | grep -E '^(GITHUB_|RUNNER_|IMAGELINT_|NO_COLOR$)')
            elif [ "${IMAGELINT_SUDO:-auto}" = true ]; then
                echo "imagelint: error: the sudo input is true, but sudo -n cannot run as root here" >&2
                exit 2
            fi
        fi ;;
    *) echo "imagelint: error: the sudo input '${IMAGELINT_SUDO//[^[:alnum:]]/?}': expected auto, true or false" >&2
       exit 2 ;;
esac

for path in "$report" "$sarif" "$diff_path"; do
    [ -n "$path" ] && mkdir -p -- "$(dirname -- "$path")"  # the action's own outputs: their directories made
done
"${as_root[@]}" "${imagelint[@]}" "${args[@]}"
code=$?
if [ "${#as_root[@]}" -gt 0 ]; then
    for path in "${written[@]}"; do
        # the file imagelint wrote (it replaces a path whole), never what a link there points at
        [ -f "$path" ] && [ ! -L "$path" ] && sudo -n chown -h -- "$(id -u):$(id -g)" "$path"
    done
fi

diff_verdict=""
if [ -n "$baseline" ] && { [ "$code" = 0 ] || [ "$code" = 1 ]; } && [ -f "$report" ]; then
    diff_args=(diff -f text -f "json:$diff_path")
    [ -n "${IMAGELINT_CONFIG:-}" ] && diff_args+=("--config=$IMAGELINT_CONFIG")
    markdown=$(mktemp)
    diff_args+=(-f "markdown:$markdown" -- "$baseline" "$report")
    "${imagelint[@]}" "${diff_args[@]}"
    diff_code=$?
    case "$diff_code" in
        0) diff_verdict=pass ;;
        1) diff_verdict=fail ;;
        3) diff_verdict=inconclusive ;;
        *) diff_verdict=error ;;
    esac
    if [ -n "${GITHUB_STEP_SUMMARY:-}" ] && [ -s "$markdown" ]; then
        # a blank line first: after the audit's last line the heading would be paragraph text
        { printf '\n'; cat "$markdown"; } >>"$GITHUB_STEP_SUMMARY"
    fi
    rm -f "$markdown"
    if [ "$code" = 0 ] && [ "${IMAGELINT_FAIL_ON_DIFF:-false}" = "true" ]; then
        code=$diff_code
    fi
    [ -f "$diff_path" ] || diff_path=""
else
    diff_path=""  # no diff: no baseline, or no judged report of this run to compare
fi
[ -f "$report" ] || report=""
[ -n "$sarif" ] && [ ! -f "$sarif" ] && sarif=""

if [ -n "${GITHUB_OUTPUT:-}" ]; then
    pairs=("report-path=$report" "sarif-path=$sarif")
    [ -n "$baseline" ] && pairs+=("diff-path=$diff_path" "diff-verdict=$diff_verdict")
    for pair in "${pairs[@]}"; do
        delimiter="ghadelimiter_$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
        printf '%s<<%s\n%s\n%s\n' "${pair%%=*}" "$delimiter" "${pair#*=}" "$delimiter" >>"$GITHUB_OUTPUT"
    done
fi
exit "$code"
