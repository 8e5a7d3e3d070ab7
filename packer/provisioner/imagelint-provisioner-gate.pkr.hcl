# imagelint as a provisioner step: gate the build instance before the AMI is captured.
#
# After your own provisioners, imagelint is installed into a throwaway virtual environment on the
# build instance, runs `imagelint audit / --live` there, the JSON report is downloaded to the Packer
# host, and imagelint is removed again so that it is not baked into the image. The last step exits
# with imagelint's exit code: on a failure no AMI is created (Packer terminates the instance).
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

variable "imagelint_version" {
  type        = string
  default     = "0.1.0"
  description = "imagelint version installed (temporarily) on the build instance."
}

variable "imagelint_pip_spec" {
  type        = string
  default     = ""
  description = "What pip installs instead of imagelint==VERSION (a wheel URL, an internal index spec)."
}

variable "python" {
  type        = string
  default     = "python3"
  description = "Python >= 3.11 with the venv module on the build instance."
}

variable "fail_on" {
  type        = string
  default     = "medium"
  description = "Lowest finding severity that fails the gate: info|low|medium|high|critical."
}

variable "imagelint_config" {
  type        = string
  default     = ""
  description = "The .imagelint.yaml uploaded to the build instance (empty: imagelint.yaml beside this template)."
}

variable "report_path" {
  type        = string
  default     = "imagelint-report.json"
  description = "Where the downloaded JSON report is written on the Packer host."
}

locals {
  build_stamp = formatdate("YYYYMMDDhhmmss", timestamp())
  # Everything imagelint leaves on the instance lives here, and is removed by the last step.
  workdir = "/var/tmp/imagelint-gate"
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

  # 1. Install imagelint into a throwaway venv and upload the configuration.
  provisioner "shell" {
    environment_vars = [
      "IMAGELINT_DIR=${local.workdir}",
      "IMAGELINT_PYTHON=${var.python}",
      "IMAGELINT_VERSION=${var.imagelint_version}",
      "IMAGELINT_PIP_SPEC=${var.imagelint_pip_spec}",
    ]
    execute_command = "chmod +x {{ .Path }}; {{ .Vars }} sudo -E sh -eu '{{ .Path }}'"
    inline = [
      "spec=\"$IMAGELINT_PIP_SPEC\"; [ -n \"$spec\" ] || spec=\"imagelint==$IMAGELINT_VERSION\"",
      "mkdir -p \"$IMAGELINT_DIR\" && chmod 0777 \"$IMAGELINT_DIR\"",
      "\"$IMAGELINT_PYTHON\" -m venv \"$IMAGELINT_DIR/venv\"",
      "\"$IMAGELINT_DIR/venv/bin/pip\" install --quiet --no-cache-dir \"$spec\"",
    ]
  }

  provisioner "file" {
    source      = local.config
    destination = "${local.workdir}/imagelint.yaml"
  }

  # 2. Run the audit; keep its exit code for step 4 so that the report is downloaded in every case.
  provisioner "shell" {
    environment_vars = [
      "IMAGELINT_DIR=${local.workdir}",
      "IMAGELINT_FAIL_ON=${var.fail_on}",
    ]
    execute_command = "chmod +x {{ .Path }}; {{ .Vars }} sudo -E sh -u '{{ .Path }}'"
    inline = [
      "\"$IMAGELINT_DIR/venv/bin/imagelint\" audit / --live --config \"$IMAGELINT_DIR/imagelint.yaml\" --fail-on \"$IMAGELINT_FAIL_ON\" -f text -f \"json:$IMAGELINT_DIR/report.json\"",
      "echo $? > \"$IMAGELINT_DIR/exit-code\"",
      "chmod 0644 \"$IMAGELINT_DIR/report.json\" || true",
    ]
  }

  # 3. Bring the report back to the Packer host.
  provisioner "file" {
    direction   = "download"
    source      = "${local.workdir}/report.json"
    destination = var.report_path
  }

  # 4. Remove imagelint from the image, then pass or fail the build with imagelint's exit code.
  provisioner "shell" {
    environment_vars = [
      "IMAGELINT_DIR=${local.workdir}",
    ]
    execute_command = "chmod +x {{ .Path }}; {{ .Vars }} sudo -E sh -eu '{{ .Path }}'"
    inline = [
      "rc=\"$(cat \"$IMAGELINT_DIR/exit-code\")\"",
      "rm -rf \"$IMAGELINT_DIR\"",
      "echo \"imagelint gate: exit code $rc (0 pass, 1 fail, 2 usage, 3 inconclusive)\"",
      "exit \"$rc\"",
    ]
  }
}
