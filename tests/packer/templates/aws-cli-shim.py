"""A stand-in for the one AWS CLI call packer/ami-gate-delete makes (the AWS CLI is not installed here).

``aws ec2 describe-images --region R --owners self --filters Name=tag:K,Values=V --query 'Images[0].ImageId'
--output text``, answered with boto3 against ``$AWS_ENDPOINT_URL``; anything else is refused.
"""

from __future__ import annotations

import argparse
import sys

import boto3


def main() -> int:
    parser = argparse.ArgumentParser(prog="aws")
    parser.add_argument("service", choices=["ec2"])
    parser.add_argument("operation", choices=["describe-images"])
    parser.add_argument("--region", required=True)
    parser.add_argument("--owners", required=True)
    parser.add_argument("--filters", required=True)
    parser.add_argument("--query", required=True, choices=["Images[0].ImageId"])
    parser.add_argument("--output", required=True, choices=["text"])
    args = parser.parse_args()
    fields = dict(part.split("=", 1) for part in args.filters.split(","))
    ec2 = boto3.client("ec2", region_name=args.region)
    images = ec2.describe_images(
        Owners=[args.owners], Filters=[{"Name": fields["Name"], "Values": [fields["Values"]]}]
    )["Images"]
    print(images[0]["ImageId"] if images else "None")
    return 0


if __name__ == "__main__":
    sys.exit(main())
