#!/bin/sh
# The imagelint gate of both AMI recipes (POSIX sh): packer/ami-gate ("gate-and-tag") and, through
# a symlink, packer/ami-gate-delete ("gate-and-delete"). Their first shell-local post-processor runs
# it (`script = "${path.root}/imagelint-ami-gate.sh"`) with the IMAGELINT_* environment set from the
# template's variables; it reads nothing else. Each template sets every variable below, empty where
# its recipe does not use it, so that nothing the Packer host happens to export changes the gate.
#
#   IMAGELINT_MANIFEST            gate-and-tag: `imagelint ami --packer-manifest` picks this run's AMI
#   IMAGELINT_BUILD_ID            gate-and-delete: the AMI tagged imagelint:build-id=ID, found with
#                                 IMAGELINT_AWS in IMAGELINT_REGION (retried: tags are eventually
#                                 consistent in describe-images)
#   IMAGELINT_KEEP_INCONCLUSIVE   true: exit 3 (inconclusive) is a warning and the step succeeds
#   IMAGELINT_VERSION             non-empty: refuse any other `$IMAGELINT --version` (exit 2)
#   IMAGELINT_OFFLINE_MODE        snapshot|volume: `imagelint ami --mode` before any launch; none: skip
#   IMAGELINT_FAIL_ON, IMAGELINT_CONFIG, IMAGELINT_SOAK_DURATION, IMAGELINT_INSTANCE_PROFILE,
#   IMAGELINT_REPORT_BUCKET, IMAGELINT_EXTRA_ARGS (split on white space)   `imagelint ami` options
#
# Exit codes are imagelint's (0 pass, 1 fail, 2 usage, 3 inconclusive); 2 for a version mismatch, 3
# when no AMI carries the build id. Every value is passed quoted, as one argument (IMAGELINT_EXTRA_ARGS:
# split into words), and none is ever evaluated as code. No value is read as an option of its own:
# each is an option's argument in the --option=VALUE form, and the AMI comes after `--`, last;
# IMAGELINT_EXTRA_ARGS are options on purpose (the template's extra_args).
set -eu

if [ -n "$IMAGELINT_VERSION" ] && [ "$("$IMAGELINT" --version)" != "imagelint $IMAGELINT_VERSION" ]; then echo "imagelint gate: $IMAGELINT is not imagelint $IMAGELINT_VERSION" >&2; exit 2; fi

# The AMI to gate, the last arguments of `imagelint ami`: the manifest option, or `-- REGION:AMI`.
if [ -n "$IMAGELINT_MANIFEST" ] && [ -z "$IMAGELINT_BUILD_ID" ]; then
    ami=; target_option="--packer-manifest=$IMAGELINT_MANIFEST"
elif [ -n "$IMAGELINT_BUILD_ID" ] && [ -z "$IMAGELINT_MANIFEST" ]; then
    i=0; ami=; while [ $i -lt 10 ]; do ami="$("$IMAGELINT_AWS" ec2 describe-images "--region=$IMAGELINT_REGION" --owners self --filters "Name=tag:imagelint:build-id,Values=$IMAGELINT_BUILD_ID" --query 'Images[0].ImageId' --output text)"; case "$ami" in ami-*) break ;; esac; i=$((i+1)); sleep $((i*3)); done
    case "$ami" in ami-*) ;; *) echo "imagelint gate: no AMI tagged imagelint:build-id=$IMAGELINT_BUILD_ID" >&2; exit 3 ;; esac
    target_option=--
else
    echo "imagelint gate: set one of IMAGELINT_MANIFEST (gate-and-tag) and IMAGELINT_BUILD_ID (gate-and-delete)" >&2
    exit 2
fi

# `imagelint ami` with the options given ("$@"), then the AMI.
gate() {
    if [ "$target_option" = -- ]; then set -- "$@" -- "$IMAGELINT_REGION:$ami"; else set -- "$@" "$target_option"; fi
    echo "imagelint gate${label}: $IMAGELINT $*"
    "$IMAGELINT" "$@"
}

# The offline gate: read the AMI's root snapshot before any instance is launched.
if [ "$IMAGELINT_OFFLINE_MODE" != none ]; then
    set -- ami "--mode=$IMAGELINT_OFFLINE_MODE" --tag "--fail-on=$IMAGELINT_FAIL_ON"
    if [ -n "$IMAGELINT_CONFIG" ]; then set -- "$@" "--config=$IMAGELINT_CONFIG"; fi
    label=" (offline)"; gate "$@"
fi

# The launch gate: boot, audit and soak an instance of the AMI, and tag the verdict.
set -- ami --tag "--report-bucket=$IMAGELINT_REPORT_BUCKET" "--fail-on=$IMAGELINT_FAIL_ON" "--soak=$IMAGELINT_SOAK_DURATION"
if [ -n "$IMAGELINT_INSTANCE_PROFILE" ]; then set -- "$@" "--instance-profile=$IMAGELINT_INSTANCE_PROFILE"; fi
if [ -n "$IMAGELINT_CONFIG" ]; then set -- "$@" "--config=$IMAGELINT_CONFIG"; fi
# extra_args: split into words here (unquoted on purpose; a glob in it is expanded), never evaluated
set -- "$@" $IMAGELINT_EXTRA_ARGS
rc=0; label=; gate "$@" || rc=$?
if [ "$rc" = 3 ] && [ "$IMAGELINT_KEEP_INCONCLUSIVE" = true ]; then echo "imagelint gate: WARNING: inconclusive (exit 3); keep_inconclusive keeps ${ami:-the AMI}, not tagged pass" >&2; exit 0; fi
exit "$rc"
