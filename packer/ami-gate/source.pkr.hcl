# What both AMI recipes build: packer/ami-gate ("gate-and-tag") and, through a symlink,
# packer/ami-gate-delete ("gate-and-delete"). Each recipe's own imagelint-ami-gate*.pkr.hcl sets
# local.ami_tags (gate-and-delete: the imagelint:build-id tag its gate finds the AMI by) and the build.

packer {
  required_version = ">= 1.7.0"
  required_plugins {
    amazon = {
      source  = "github.com/hashicorp/amazon"
      version = ">= 1.2.0"
    }
  }
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
  # the candidate tag scopes the gate's --tag and --on-fail permissions to this build's AMI and
  # snapshots (imagelint ami policies --candidate-tag KEY=VALUE: docs/reference/iam-policies.md)
  tags          = merge(local.ami_tags, var.candidate_tags)
  snapshot_tags = var.candidate_tags
}
