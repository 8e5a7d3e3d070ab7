# imagelint as a provisioner step: gate the build instance before the AMI is captured.
#
# After your own provisioners, the Packer host writes imagelint's POSIX-shell collector and its plan
# (`imagelint collector`), uploads them, and the build instance runs `sh collect.sh` (POSIX sh,
# coreutils, tar: no Python, no package install, no network), which gathers what the rules read,
# with `systemctl show`, into a bundle. The bundle is downloaded, the collector's directory removed
# from the instance (nothing of imagelint is baked into the image), and the verdict is decided on the
# Packer host: `imagelint audit BUNDLE` in a shell-local step, whose exit code passes or fails the
# build. On a failure no AMI is created (Packer terminates the instance).
#
# What this catches: everything in the image's files (enabled units, missing executables, vendor
# agents without configuration, hygiene such as SSH host keys and machine-id) plus the live state of
# the build instance (failed units, units restarting right now). What it cannot: a build instance is
# not a clean first boot (cloud-init has run, the journal holds provisioning noise, the hygiene
# clean-up may come later), and memory-cgroup growth needs minutes of an instance booted from the
# AMI: run `imagelint ami` (packer/ami-gate) or `imagelint soak` there for that.
#
#   packer init packer/provisioner && packer build -var source_ami=ami-... packer/provisioner

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
  default = "imagelint-provisioned"
}

variable "imagelint" {
  type        = string
  default     = "imagelint"
  description = "The imagelint command on the Packer host (a path, or a name found in PATH)."
}

variable "imagelint_version" {
  type        = string
  default     = "0.1.0"
  description = "The imagelint version the Packer host must run (empty: any): the collector and the audit are its."
}

variable "fail_on" {
  type        = string
  default     = "medium"
  description = "Lowest finding severity that fails the gate: info|low|medium|high|critical."
}

variable "imagelint_config" {
  type        = string
  default     = ""
  description = "The .imagelint.yaml of the plan and the audit, on the Packer host (empty: imagelint.yaml beside this template)."
}

variable "report_path" {
  type        = string
  default     = "imagelint-report.json"
  description = "Where the JSON report is written on the Packer host."
}

variable "work_dir" {
  type        = string
  default     = "imagelint-gate"
  description = "Directory on the Packer host for the collector, its plan and the downloaded bundle."
}

locals {
  build_stamp = formatdate("YYYYMMDDhhmmss", timestamp())
  # Everything the gate puts on the instance lives here, and is removed before the verdict.
  workdir = "/var/tmp/imagelint-gate"
  bundle  = "${var.work_dir}/bundle"
  config  = var.imagelint_config != "" ? var.imagelint_config : "${path.root}/imagelint.yaml"
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

  # Your provisioners go here, before the gate.

  # 1. On the Packer host: the collector and its plan, from the config the audit will use.
  provisioner "shell-local" {
    environment_vars = [
      "IMAGELINT=${var.imagelint}",
      "IMAGELINT_VERSION=${var.imagelint_version}",
      "IMAGELINT_CONFIG=${local.config}",
      "IMAGELINT_WORK=${var.work_dir}",
    ]
    inline = [
      "set -eu",
      "if [ -n \"$IMAGELINT_VERSION\" ] && [ \"$(\"$IMAGELINT\" --version)\" != \"imagelint $IMAGELINT_VERSION\" ]; then echo \"imagelint gate: $IMAGELINT is not imagelint $IMAGELINT_VERSION\" >&2; exit 2; fi",
      "\"$IMAGELINT\" collector \"--config=$IMAGELINT_CONFIG\" -- \"$IMAGELINT_WORK\"",
    ]
  }

  provisioner "shell" {
    environment_vars = ["IMAGELINT_DIR=${local.workdir}"]
    execute_command  = "chmod +x {{ .Path }}; {{ .Vars }} sudo -E sh -eu '{{ .Path }}'"
    inline = [
      "rm -rf \"$IMAGELINT_DIR\" && mkdir -p \"$IMAGELINT_DIR\" && chmod 0777 \"$IMAGELINT_DIR\"",
    ]
  }

  # 2. Upload them (written by step 1, so checked only when uploaded).
  provisioner "file" {
    source      = "${var.work_dir}/collect.sh"
    destination = "${local.workdir}/collect.sh"
    generated   = true
  }

  provisioner "file" {
    source      = "${var.work_dir}/plan.txt"
    destination = "${local.workdir}/plan.txt"
    generated   = true
  }

  # 3. Collect as root with the POSIX shell; the bundle's path is printed by collect.sh.
  provisioner "shell" {
    environment_vars = ["IMAGELINT_DIR=${local.workdir}"]
    execute_command  = "chmod +x {{ .Path }}; {{ .Vars }} sudo -E sh -eu '{{ .Path }}'"
    inline = [
      "bundle=\"$(sh \"$IMAGELINT_DIR/collect.sh\" \"$IMAGELINT_DIR\")\" || { echo \"imagelint gate: collection failed\" >&2; exit 3; }",
      "cp \"$bundle\" \"$IMAGELINT_DIR/bundle\" && chmod 0644 \"$IMAGELINT_DIR/bundle\"",
      "echo \"imagelint gate: bundle of $(wc -c < \"$IMAGELINT_DIR/bundle\") bytes\"",
    ]
  }

  # 4. Bring the bundle back to the Packer host.
  provisioner "file" {
    direction   = "download"
    source      = "${local.workdir}/bundle"
    destination = local.bundle
  }

  # 5. Remove the collector from the image.
  provisioner "shell" {
    environment_vars = ["IMAGELINT_DIR=${local.workdir}"]
    execute_command  = "chmod +x {{ .Path }}; {{ .Vars }} sudo -E sh -eu '{{ .Path }}'"
    inline           = ["rm -rf \"$IMAGELINT_DIR\""]
  }

  # 6. The verdict, on the Packer host: imagelint's exit code passes or fails the build. (Here and in
  #    step 1, variables reach imagelint as options' own arguments, the paths after `--`.)
  provisioner "shell-local" {
    environment_vars = [
      "IMAGELINT=${var.imagelint}",
      "IMAGELINT_CONFIG=${local.config}",
      "IMAGELINT_BUNDLE=${local.bundle}",
      "IMAGELINT_FAIL_ON=${var.fail_on}",
      "IMAGELINT_REPORT=${var.report_path}",
    ]
    inline = [
      "echo \"imagelint gate: $IMAGELINT audit $IMAGELINT_BUNDLE\"",
      "\"$IMAGELINT\" audit \"--config=$IMAGELINT_CONFIG\" \"--fail-on=$IMAGELINT_FAIL_ON\" -f text -f \"json:$IMAGELINT_REPORT\" -- \"$IMAGELINT_BUNDLE\"",
    ]
  }
}
