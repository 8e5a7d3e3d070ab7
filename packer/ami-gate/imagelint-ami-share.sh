#!/bin/sh
# Share and copy the AMI after the gate passed (POSIX sh), in both AMI recipes: packer/ami-gate and,
# through a symlink, packer/ami-gate-delete. It is the shell-local post-processor right after the
# gate in the same chain, so it runs only when the gate succeeded. It reads only the IMAGELINT_*
# environment the template sets:
#
#   IMAGELINT_AWS             the AWS CLI
#   IMAGELINT_REGION          the AMI's region
#   IMAGELINT_AMI_NAME        the AMI's name (found by it, retried: describe-images is eventually consistent)
#   IMAGELINT_SHARE_ACCOUNTS  accounts to give launch permission, space-separated (empty: none)
#   IMAGELINT_COPY_REGIONS    regions to copy the AMI to, with its tags, space-separated (empty: none)
#
# Nothing to share or copy: exit 0 at once. No AMI of that name: exit 3. Values reach the AWS CLI as
# --option=VALUE, never as options of their own.
set -eu

if [ -z "$IMAGELINT_SHARE_ACCOUNTS$IMAGELINT_COPY_REGIONS" ]; then exit 0; fi
i=0; ami=; while [ $i -lt 10 ]; do ami="$("$IMAGELINT_AWS" ec2 describe-images "--region=$IMAGELINT_REGION" --owners self --filters "Name=name,Values=$IMAGELINT_AMI_NAME" --query 'Images[0].ImageId' --output text)"; case "$ami" in ami-*) break ;; esac; i=$((i+1)); sleep $((i*3)); done
case "$ami" in ami-*) ;; *) echo "imagelint share: no AMI named $IMAGELINT_AMI_NAME" >&2; exit 3 ;; esac
for account in $IMAGELINT_SHARE_ACCOUNTS; do echo "imagelint share: $ami to $account"; "$IMAGELINT_AWS" ec2 modify-image-attribute "--region=$IMAGELINT_REGION" "--image-id=$ami" "--launch-permission=Add=[{UserId=$account}]"; done
for region in $IMAGELINT_COPY_REGIONS; do echo "imagelint share: copying $ami to $region"; "$IMAGELINT_AWS" ec2 copy-image "--region=$region" "--source-region=$IMAGELINT_REGION" "--source-image-id=$ami" "--name=$IMAGELINT_AMI_NAME" --copy-image-tags --query ImageId --output text; done
