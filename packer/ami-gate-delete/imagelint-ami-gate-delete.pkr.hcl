# imagelint as the first post-processor: a failing AMI is deleted ("gate-and-delete").
#
# No manifest runs before the gate, so when `imagelint ami` fails, Packer destroys the builder's
# artifact: it deregisters the AMI and deletes its snapshots ("Deleting original artifact"). The
# build fails and nothing is left to ship. The AMI is found by the unique build-id tag this template
# puts on it (with the AWS CLI; the manifest that `imagelint ami` otherwise reads does not exist yet).
# See packer/README.md, and packer/ami-gate for the variant that keeps a failing AMI tagged fail.
#
# This directory is the recipe: variables.pkr.hcl, source.pkr.hcl and the gate and share scripts are
# symlinks to packer/ami-gate's (shared by both recipes); this file has what only gate-and-delete has:
# keep_inconclusive, the build id and its tag, and the build. Build the directory, not this file alone.
#
#   packer init packer/ami-gate-delete && packer build -var source_ami=ami-... packer/ami-gate-delete

variable "keep_inconclusive" {
  type        = bool
  default     = false
  description = "Exit 3 (inconclusive: the instance never reported, an AWS call failed) fails the gate, so Packer deletes the AMI too. true: keep it (the build then succeeds with a warning, the AMI not tagged pass)."
}

locals {
  build_id = uuidv4()
  # the source (source.pkr.hcl) tags the AMI with this build's id: the gate finds the AMI by it
  ami_tags = {
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
      script = "${path.root}/imagelint-ami-gate.sh" # a symlink to packer/ami-gate's
      # the script's path is sh's $0, never spliced into the command line (a checkout path with spaces)
      execute_command = ["/bin/sh", "-c", "{{.Vars}} /bin/sh \"$0\"", "{{.Script}}"]
      # every variable the script reads, that of gate-and-tag empty (nothing leaks in from the host)
      environment_vars = [
        "IMAGELINT=${var.imagelint}",
        "IMAGELINT_MANIFEST=",
        "IMAGELINT_BUILD_ID=${local.build_id}",
        "IMAGELINT_AWS=${var.aws}",
        "IMAGELINT_REGION=${var.region}",
        "IMAGELINT_KEEP_INCONCLUSIVE=${var.keep_inconclusive}",
        "IMAGELINT_FAIL_ON=${var.fail_on}",
        "IMAGELINT_CONFIG=${var.imagelint_config}",
        "IMAGELINT_SOAK_DURATION=${var.soak_duration}",
        "IMAGELINT_VERSION=${var.imagelint_version}",
        "IMAGELINT_INSTANCE_PROFILE=${var.instance_profile}",
        "IMAGELINT_REPORT_BUCKET=${var.report_bucket}",
        "IMAGELINT_EXTRA_ARGS=${var.extra_args}",
        "IMAGELINT_OFFLINE_MODE=${var.offline_mode}",
      ]
    }

    # share only after the gate passed: a post-processor of the same chain runs only when the one
    # before it succeeded (a separate post-processor block would run even after a failing gate)
    post-processor "shell-local" {
      script          = "${path.root}/imagelint-ami-share.sh" # a symlink to packer/ami-gate's
      execute_command = ["/bin/sh", "-c", "{{.Vars}} /bin/sh \"$0\"", "{{.Script}}"]
      environment_vars = [
        "IMAGELINT_AWS=${var.aws}",
        "IMAGELINT_REGION=${var.region}",
        "IMAGELINT_AMI_NAME=${var.ami_name_prefix}-${local.build_stamp}",
        "IMAGELINT_SHARE_ACCOUNTS=${join(" ", var.share_account_ids)}",
        "IMAGELINT_COPY_REGIONS=${join(" ", var.copy_regions)}",
      ]
    }
  }
}
