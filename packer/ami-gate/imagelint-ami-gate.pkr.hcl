# imagelint as a post-processor: gate the finished AMI ("gate-and-tag").
#
# The manifest post-processor runs first and records this run's AMI (keyed by PACKER_RUN_UUID);
# then `imagelint ami` boots a throwaway instance from the AMI, audits and soaks it over SSM, and
# tags the AMI with its verdict (imagelint:verdict and friends). A failing verdict fails the build,
# but the AMI is kept (tagged fail) because the manifest step already marked the artifact as kept.
# See packer/README.md for the other ordering ("gate-and-delete") and its consequences.
#
# This directory is the recipe: variables.pkr.hcl and source.pkr.hcl (shared with packer/ami-gate-delete,
# which links to them), the gate and share scripts (likewise), and this file: what only gate-and-tag has.
# Build the directory, not this file alone.
#
#   packer init packer/ami-gate && packer build -var source_ami=ami-... packer/ami-gate

variable "manifest_path" {
  type    = string
  default = "packer-manifest.json"
}

locals {
  ami_tags = {} # the gate tags the verdict (imagelint:verdict and friends); the source adds none
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
      script = "${path.root}/imagelint-ami-gate.sh" # shared with packer/ami-gate-delete
      # the script's path is sh's $0, never spliced into the command line (a checkout path with spaces)
      execute_command = ["/bin/sh", "-c", "{{.Vars}} /bin/sh \"$0\"", "{{.Script}}"]
      # every variable the script reads, those of gate-and-delete empty (nothing leaks in from the host)
      environment_vars = [
        "IMAGELINT=${var.imagelint}",
        "IMAGELINT_MANIFEST=${var.manifest_path}",
        "IMAGELINT_BUILD_ID=",
        "IMAGELINT_AWS=${var.aws}",
        "IMAGELINT_REGION=${var.region}",
        "IMAGELINT_KEEP_INCONCLUSIVE=false",
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
      script          = "${path.root}/imagelint-ami-share.sh" # shared with packer/ami-gate-delete
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
