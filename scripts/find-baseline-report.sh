#!/usr/bin/env bash
# Find the imagelint report of an AMI by its imagelint:report-sha256 tag (packer/README.md, "Baseline").
#
# Usage: scripts/find-baseline-report.sh SOURCE_AMI BUCKET PREFIX DEST
#   `imagelint ami --tag --report-bucket BUCKET --report-prefix PREFIX` tagged SOURCE_AMI with the
#   SHA-256 of its JSON report and kept the report at s3://BUCKET/PREFIX<run-id>/report.json. The tag
#   names the content, not the key: this lists PREFIX, fetches each report.json and keeps the one
#   whose digest matches, at DEST. The region and credentials are the AWS CLI's (AWS_DEFAULT_REGION,
#   AWS_ENDPOINT_URL...); $AWS names the CLI (default: aws).
# Exit codes: 0 found (DEST written); 1 the AMI has no imagelint:report-sha256 tag, or no report in
# PREFIX has that digest (DEST not written); 2 bad usage; other: the AWS CLI's own failure.
set -euo pipefail
[ "$#" = 4 ] || { echo "usage: $0 SOURCE_AMI BUCKET PREFIX DEST" >&2; exit 2; }
for arg in "$@"; do  # no argument is ever read as an option (./NAME for a file named -NAME)
    case "$arg" in -*) echo "find-baseline-report: '$arg' starts with '-': not an AMI, bucket, prefix or file" >&2; exit 2 ;; esac
done
ami=$1 bucket=$2 prefix=$3 dest=$4
aws=${AWS:-aws}
sha=$("$aws" ec2 describe-images "--image-ids=$ami" \
    --query "Images[0].Tags[?Key=='imagelint:report-sha256'].Value | [0]" --output text)
case "$sha" in
    [0-9a-f]*) ;;
    *) echo "find-baseline-report: $ami has no imagelint:report-sha256 tag" >&2; exit 1 ;;
esac
candidate=$(mktemp)
trap 'rm -f "$candidate"' EXIT
keys=$("$aws" s3api list-objects-v2 "--bucket=$bucket" "--prefix=$prefix" \
    --query "Contents[?ends_with(Key, 'report.json')].Key" --output text)
for key in $keys; do
    [ "$key" = None ] && continue
    "$aws" s3 cp --quiet -- "s3://$bucket/$key" "$candidate"
    if [ "$(sha256sum "$candidate" | cut -d' ' -f1)" = "$sha" ]; then
        mv -- "$candidate" "$dest"
        echo "find-baseline-report: s3://$bucket/$key" >&2
        exit 0
    fi
done
echo "find-baseline-report: no report in s3://$bucket/$prefix has sha256 $sha" >&2
exit 1
