# imagelint as the first post-processor: a failing AMI is deleted ("gate-and-delete").
#
# No manifest runs before the gate, so when `imagelint ami` fails, Packer destroys the builder's
# artifact: it deregisters the AMI and deletes its snapshots ("Deleting original artifact"). The
# build fails and nothing is left to ship. The AMI is found by the unique build-id tag this template
# puts on it (with the AWS CLI; the manifest that `imagelint ami` otherwise reads does not exist yet).
# See packer/README.md, and packer/ami-gate for the variant that keeps a failing AMI tagged fail.
#
#   packer init packer/ami-gate-delete && packer build -var source_ami=ami-... packer/ami-gate-delete

packer {
  required_version = ">= 1.7.0"
  required_plugins {
    amazon = {
      source  = "github.com/hashicorp/amazon"
      version = ">= 1.2.0"
    }
  }
}

variable "region" {
  type    = string
  default = "us-east-1"
}

variable "source_ami" {
  type        = string
  description = "The AMI to start from."
}

variable "instance_type" {
  type    = string
  default = "t3.small"
}

variable "ssh_username" {
  type    = string
  default = "ec2-user"
}

variable "ami_name_prefix" {
  type    = string
  default = "imagelint-gated"
}

variable "imagelint" {
  type        = string
  default     = "imagelint"
  description = "The imagelint command on the Packer host (e.g. /opt/imagelint/bin/imagelint)."
}

variable "imagelint_version" {
  type        = string
  default     = ""
  description = "Refuse to gate unless the Packer host's imagelint is this version (empty: any). The test instance gets the same version."
}

variable "instance_profile" {
  type        = string
  default     = ""
  description = "Instance profile of the test instance: AmazonSSMManagedInstanceCore and s3:PutObject on report_bucket."
}

variable "extra_args" {
  type        = string
  default     = ""
  description = "Further `imagelint ami` options, space-separated (e.g. \"--instance-type t3.large --on-fail deregister\")."
}

variable "fail_on" {
  type        = string
  default     = "medium"
  description = "Lowest finding severity that fails the gate: info|low|medium|high|critical."
}

variable "imagelint_config" {
  type        = string
  default     = ""
  description = "Path of an .imagelint.yaml on the Packer host (empty: built-in defaults)."
}

variable "soak_duration" {
  type        = string
  default     = "10m"
  description = "How long `imagelint ami` soaks the instance booted from the AMI (e.g. 10m, 30m)."
}

variable "offline_mode" {
  type        = string
  default     = "snapshot"
  description = "The offline gate before the instance is launched: snapshot (read the root snapshot in place through the EBS direct APIs: ebs:ListSnapshotBlocks, ebs:GetSnapshotBlock, ec2:DescribeImages, kms:Decrypt for encrypted snapshots), volume (the Packer host is an EC2 instance that mounts it), or none."
}

variable "report_bucket" {
  type        = string
  description = "S3 bucket where the test instance writes its reports (needed by `imagelint ami`)."
}

variable "aws" {
  type        = string
  default     = "aws"
  description = "The AWS CLI on the Packer host (finds the AMI by its build-id tag)."
}

variable "keep_inconclusive" {
  type        = bool
  default     = false
  description = "Exit 3 (inconclusive: the instance never reported, an AWS call failed) fails the gate, so Packer deletes the AMI too. true: keep it (the build then succeeds with a warning, the AMI not tagged pass)."
}

variable "share_account_ids" {
  type        = list(string)
  default     = []
  description = "Accounts to give launch permission, after the gate passed (never ami_users in the source: that shares before the gate, and tags are invisible in other accounts)."
}

variable "copy_regions" {
  type        = list(string)
  default     = []
  description = "Regions to copy the AMI to (with its tags), after the gate passed (never ami_regions in the source)."
}

locals {
  build_stamp = formatdate("YYYYMMDDhhmmss", timestamp())
  build_id    = uuidv4()
}

source "amazon-ebs" "image" {
  region        = var.region
  source_ami    = var.source_ami
  instance_type = var.instance_type
  ssh_username  = var.ssh_username
  ami_name      = "${var.ami_name_prefix}-${local.build_stamp}"
  tags = {
    "imagelint:build-id" = local.build_id
  }
}

build {
  sources = ["source.amazon-ebs.image"]

  # Your provisioners go here.

  # imagelint is the first post-processor. A failure here (exit 1, 2 or 3) makes Packer deregister the
  # AMI and delete its snapshots; do not put a manifest post-processor in front of it (that keeps the AMI).
  post-processors {
    post-processor "shell-local" {
      environment_vars = [
        "IMAGELINT=${var.imagelint}",
        "IMAGELINT_AWS=${var.aws}",
        "IMAGELINT_REGION=${var.region}",
        "IMAGELINT_BUILD_ID=${local.build_id}",
        "IMAGELINT_FAIL_ON=${var.fail_on}",
        "IMAGELINT_CONFIG=${var.imagelint_config}",
        "IMAGELINT_SOAK_DURATION=${var.soak_duration}",
        "IMAGELINT_VERSION=${var.imagelint_version}",
        "IMAGELINT_INSTANCE_PROFILE=${var.instance_profile}",
        "IMAGELINT_REPORT_BUCKET=${var.report_bucket}",
        "IMAGELINT_EXTRA_ARGS=${var.extra_args}",
        "IMAGELINT_KEEP_INCONCLUSIVE=${var.keep_inconclusive}",
        "IMAGELINT_OFFLINE_MODE=${var.offline_mode}",
      ]
      inline = [
        "set -eu",
        "if [ -n \"$IMAGELINT_VERSION\" ] && [ \"$(\"$IMAGELINT\" --version)\" != \"imagelint $IMAGELINT_VERSION\" ]; then echo \"imagelint gate: $IMAGELINT is not imagelint $IMAGELINT_VERSION\" >&2; exit 2; fi",
        "i=0; ami=; while [ $i -lt 10 ]; do ami=\"$(\"$IMAGELINT_AWS\" ec2 describe-images --region \"$IMAGELINT_REGION\" --owners self --filters \"Name=tag:imagelint:build-id,Values=$IMAGELINT_BUILD_ID\" --query 'Images[0].ImageId' --output text)\"; case \"$ami\" in ami-*) break ;; esac; i=$((i+1)); sleep $((i*3)); done",
        "case \"$ami\" in ami-*) ;; *) echo \"imagelint gate: no AMI tagged imagelint:build-id=$IMAGELINT_BUILD_ID\" >&2; exit 3 ;; esac",
        "if [ \"$IMAGELINT_OFFLINE_MODE\" != none ]; then set -- ami \"$IMAGELINT_REGION:$ami\" --mode \"$IMAGELINT_OFFLINE_MODE\" --tag --fail-on \"$IMAGELINT_FAIL_ON\"; if [ -n \"$IMAGELINT_CONFIG\" ]; then set -- \"$@\" --config \"$IMAGELINT_CONFIG\"; fi; echo \"imagelint gate (offline): $IMAGELINT $*\"; \"$IMAGELINT\" \"$@\"; fi",
        "set -- ami \"$IMAGELINT_REGION:$ami\" --tag --report-bucket \"$IMAGELINT_REPORT_BUCKET\" --fail-on \"$IMAGELINT_FAIL_ON\" --soak \"$IMAGELINT_SOAK_DURATION\"",
        "if [ -n \"$IMAGELINT_INSTANCE_PROFILE\" ]; then set -- \"$@\" --instance-profile \"$IMAGELINT_INSTANCE_PROFILE\"; fi",
        "if [ -n \"$IMAGELINT_CONFIG\" ]; then set -- \"$@\" --config \"$IMAGELINT_CONFIG\"; fi",
        "set -- \"$@\" $IMAGELINT_EXTRA_ARGS",
        "echo \"imagelint gate: $IMAGELINT $*\"",
        "rc=0; \"$IMAGELINT\" \"$@\" || rc=$?",
        "if [ \"$rc\" = 3 ] && [ \"$IMAGELINT_KEEP_INCONCLUSIVE\" = true ]; then echo \"imagelint gate: WARNING: inconclusive (exit 3); keep_inconclusive keeps $ami, not tagged pass\" >&2; exit 0; fi",
        "exit \"$rc\"",
      ]
    }

    # share only after the gate passed: a post-processor of the same chain runs only when the one
    # before it succeeded (a separate post-processor block would run even after a failing gate)
    post-processor "shell-local" {
      environment_vars = [
        "IMAGELINT_AWS=${var.aws}",
        "IMAGELINT_REGION=${var.region}",
        "IMAGELINT_AMI_NAME=${var.ami_name_prefix}-${local.build_stamp}",
        "IMAGELINT_SHARE_ACCOUNTS=${join(" ", var.share_account_ids)}",
        "IMAGELINT_COPY_REGIONS=${join(" ", var.copy_regions)}",
      ]
      inline = [
        "set -eu",
        "if [ -z \"$IMAGELINT_SHARE_ACCOUNTS$IMAGELINT_COPY_REGIONS\" ]; then exit 0; fi",
        "i=0; ami=; while [ $i -lt 10 ]; do ami=\"$(\"$IMAGELINT_AWS\" ec2 describe-images --region \"$IMAGELINT_REGION\" --owners self --filters \"Name=name,Values=$IMAGELINT_AMI_NAME\" --query 'Images[0].ImageId' --output text)\"; case \"$ami\" in ami-*) break ;; esac; i=$((i+1)); sleep $((i*3)); done",
        "case \"$ami\" in ami-*) ;; *) echo \"imagelint share: no AMI named $IMAGELINT_AMI_NAME\" >&2; exit 3 ;; esac",
        "for account in $IMAGELINT_SHARE_ACCOUNTS; do echo \"imagelint share: $ami to $account\"; \"$IMAGELINT_AWS\" ec2 modify-image-attribute --region \"$IMAGELINT_REGION\" --image-id \"$ami\" --launch-permission \"Add=[{UserId=$account}]\"; done",
        "for region in $IMAGELINT_COPY_REGIONS; do echo \"imagelint share: copying $ami to $region\"; \"$IMAGELINT_AWS\" ec2 copy-image --region \"$region\" --source-region \"$IMAGELINT_REGION\" --source-image-id \"$ami\" --name \"$IMAGELINT_AMI_NAME\" --copy-image-tags --query ImageId --output text; done",
      ]
    }
  }
}
