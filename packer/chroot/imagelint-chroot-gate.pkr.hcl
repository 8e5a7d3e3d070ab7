# imagelint on an amazon-chroot build: audit the image as a mounted directory, offline.
#
# The amazon-chroot builder (run on an EC2 instance, as root) attaches a volume made from the source
# AMI to the Packer host and mounts it at `mount_path`; provisioners run in a chroot on that tree, and
# only then is the volume snapshotted and registered. The last provisioner below is a `shell-local`
# one: it runs on the Packer host, after every other provisioner, while the tree is still mounted,
# and runs `imagelint audit MOUNT_PATH` offline. A failure stops the build before any snapshot or
# AMI exists. (The builder's `post_mount_commands`, where `{{.MountPath}}` is available, run *before*
# the provisioners, so they would only see the source AMI: use them for a baseline, not the gate.)
#
#   packer init packer/chroot && sudo packer build -var source_ami=ami-... packer/chroot

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

variable "ami_name_prefix" {
  type    = string
  default = "imagelint-chroot"
}

variable "imagelint" {
  type        = string
  default     = "imagelint"
  description = "The imagelint command on the Packer host (e.g. /opt/imagelint/bin/imagelint)."
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

variable "report_path" {
  type        = string
  default     = "imagelint-report.json"
  description = "Where the JSON report is written on the Packer host."
}

variable "baseline_report" {
  type        = string
  default     = ""
  description = "JSON report of the image this build starts from (empty: none): findings are marked new/unchanged/absent; see packer/README.md for finding it by the source AMI's imagelint:report-sha256 tag."
}

variable "fail_on_new" {
  type        = bool
  default     = false
  description = "With baseline_report: fail only on findings the baseline lacks."
}

locals {
  build_stamp = formatdate("YYYYMMDDhhmmss", timestamp())
  # A mount path of our own choosing, so the shell-local provisioner knows where the image is.
  mount_path = "/mnt/packer-imagelint/${uuidv4()}"
}

source "amazon-chroot" "image" {
  region     = var.region
  source_ami = var.source_ami
  ami_name   = "${var.ami_name_prefix}-${local.build_stamp}"
  mount_path = local.mount_path
}

build {
  sources = ["source.amazon-chroot.image"]

  # Your provisioners go here (they run inside the chroot).

  # Last: the gate, on the Packer host, against the mounted image. It reads the tree and never
  # writes to it. The builder's bind mounts (/proc, /sys, /dev) inside the tree are not read.
  # Every variable reaches imagelint as an option's own argument (--config=VALUE) and the tree after
  # `--`, so no value is ever read as an option of its own.
  provisioner "shell-local" {
    environment_vars = [
      "IMAGELINT=${var.imagelint}",
      "IMAGELINT_ROOT=${local.mount_path}",
      "IMAGELINT_FAIL_ON=${var.fail_on}",
      "IMAGELINT_CONFIG=${var.imagelint_config}",
      "IMAGELINT_REPORT=${var.report_path}",
      "IMAGELINT_BASELINE=${var.baseline_report}",
      "IMAGELINT_FAIL_ON_NEW=${var.fail_on_new}",
    ]
    inline = [
      "set -eu",
      "set -- audit \"--fail-on=$IMAGELINT_FAIL_ON\" -f text -f \"json:$IMAGELINT_REPORT\"",
      "if [ -n \"$IMAGELINT_CONFIG\" ]; then set -- \"$@\" \"--config=$IMAGELINT_CONFIG\"; fi",
      "if [ -n \"$IMAGELINT_BASELINE\" ]; then set -- \"$@\" \"--baseline=$IMAGELINT_BASELINE\"; fi",
      "if [ -n \"$IMAGELINT_BASELINE\" ] && [ \"$IMAGELINT_FAIL_ON_NEW\" = true ]; then set -- \"$@\" --fail-on-new; fi",
      "set -- \"$@\" -- \"$IMAGELINT_ROOT\"",
      "echo \"imagelint gate: $IMAGELINT $*\"",
      "\"$IMAGELINT\" \"$@\"",
    ]
  }
}
