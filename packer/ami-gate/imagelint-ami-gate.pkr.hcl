# imagelint as a post-processor: gate the finished AMI ("gate-and-tag").
#
# The manifest post-processor runs first and records this run's AMI (keyed by PACKER_RUN_UUID);
# then `imagelint ami` boots a throwaway instance from the AMI, audits and soaks it over SSM, and
# tags the AMI with its verdict (imagelint:verdict and friends). A failing verdict fails the build,
# but the AMI is kept (tagged fail) because the manifest step already marked the artifact as kept.
# See packer/README.md for the other ordering ("gate-and-delete") and its consequences.
#
#   packer init packer/ami-gate && packer build -var source_ami=ami-... packer/ami-gate

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

variable "manifest_path" {
  type    = string
  default = "packer-manifest.json"
}

variable "aws" {
  type        = string
  default     = "aws"
  description = "The AWS CLI on the Packer host (shares and copies the AMI after the gate)."
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
}

source "amazon-ebs" "image" {
  region        = var.region
  source_ami    = var.source_ami
  instance_type = var.instance_type
  ssh_username  = var.ssh_username
  ami_name      = "${var.ami_name_prefix}-${local.build_stamp}"
}

build {
  sources = ["source.amazon-ebs.image"]

  # Your provisioners go here.

  post-processors {
    # 1. manifest first: it records the AMI of this run and marks the artifact as kept, so a failing
    #    gate below leaves the AMI in place, tagged imagelint:verdict=fail ("gate-and-tag").
    post-processor "manifest" {
      output     = var.manifest_path
      strip_path = true
    }

    # 2. the gate: `imagelint ami` picks this run's AMI from the manifest by $PACKER_RUN_UUID.
    #    Its exit code (0 pass, 1 fail, 2 usage, 3 inconclusive) decides the build.
    post-processor "shell-local" {
      environment_vars = [
        "IMAGELINT=${var.imagelint}",
        "IMAGELINT_MANIFEST=${var.manifest_path}",
        "IMAGELINT_FAIL_ON=${var.fail_on}",
        "IMAGELINT_CONFIG=${var.imagelint_config}",
        "IMAGELINT_SOAK_DURATION=${var.soak_duration}",
        "IMAGELINT_VERSION=${var.imagelint_version}",
        "IMAGELINT_INSTANCE_PROFILE=${var.instance_profile}",
        "IMAGELINT_REPORT_BUCKET=${var.report_bucket}",
        "IMAGELINT_EXTRA_ARGS=${var.extra_args}",
        "IMAGELINT_OFFLINE_MODE=${var.offline_mode}",
      ]
      inline = [
        "set -eu",
        "if [ -n \"$IMAGELINT_VERSION\" ] && [ \"$(\"$IMAGELINT\" --version)\" != \"imagelint $IMAGELINT_VERSION\" ]; then echo \"imagelint gate: $IMAGELINT is not imagelint $IMAGELINT_VERSION\" >&2; exit 2; fi",
        "if [ \"$IMAGELINT_OFFLINE_MODE\" != none ]; then set -- ami --packer-manifest \"$IMAGELINT_MANIFEST\" --mode \"$IMAGELINT_OFFLINE_MODE\" --tag --fail-on \"$IMAGELINT_FAIL_ON\"; if [ -n \"$IMAGELINT_CONFIG\" ]; then set -- \"$@\" --config \"$IMAGELINT_CONFIG\"; fi; echo \"imagelint gate (offline): $IMAGELINT $*\"; \"$IMAGELINT\" \"$@\"; fi",
        "set -- ami --packer-manifest \"$IMAGELINT_MANIFEST\" --tag --report-bucket \"$IMAGELINT_REPORT_BUCKET\" --fail-on \"$IMAGELINT_FAIL_ON\" --soak \"$IMAGELINT_SOAK_DURATION\"",
        "if [ -n \"$IMAGELINT_INSTANCE_PROFILE\" ]; then set -- \"$@\" --instance-profile \"$IMAGELINT_INSTANCE_PROFILE\"; fi",
        "if [ -n \"$IMAGELINT_CONFIG\" ]; then set -- \"$@\" --config \"$IMAGELINT_CONFIG\"; fi",
        "set -- \"$@\" $IMAGELINT_EXTRA_ARGS",
        "echo \"imagelint gate: $IMAGELINT $*\"",
        "exec \"$IMAGELINT\" \"$@\"",
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
