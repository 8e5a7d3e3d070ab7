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
  tags          = local.ami_tags
}
